/**
 * A bounded LRU cache in front of a loader. Invalidation bumps a generation counter so a load
 * that was already in flight when an invalidation arrived is returned but not cached: it may
 * hold the value from before the write.
 */
export class ReadCache<T> {
  readonly #entries = new Map<string, T>();
  readonly #maxEntries: number;
  readonly #load: (key: string) => Promise<T | undefined>;
  #generation = 0;

  constructor(options: { maxEntries: number; load: (key: string) => Promise<T | undefined> }) {
    this.#maxEntries = options.maxEntries;
    this.#load = options.load;
  }

  async get(key: string): Promise<T | undefined> {
    const hit = this.#entries.get(key);
    if (hit !== undefined) {
      // Re-insert to mark as most recently used.
      this.#entries.delete(key);
      this.#entries.set(key, hit);
      return hit;
    }
    const generation = this.#generation;
    const value = await this.#load(key);
    if (value !== undefined && generation === this.#generation && this.#maxEntries > 0) {
      this.#entries.set(key, value);
      if (this.#entries.size > this.#maxEntries) {
        const oldest = this.#entries.keys().next();
        if (!oldest.done) this.#entries.delete(oldest.value);
      }
    }
    return value;
  }

  invalidate(key: string): void {
    this.#generation++;
    this.#entries.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }
}
