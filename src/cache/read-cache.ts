/**
 * A bounded cache in front of a loader, evicting nearly least-recently-used first: a hit only
 * marks its entry (the second-chance scheme), because reordering a Map on every hit was a
 * visible share of a cached GET. Invalidation bumps a generation counter so a load that was
 * already in flight when an invalidation arrived is returned but not cached: it may hold the
 * value from before the write.
 */
export class ReadCache<T> {
  readonly #entries = new Map<string, { value: T; used: boolean }>();
  readonly #maxEntries: number;
  readonly #load: (key: string) => Promise<T | undefined>;
  #generation = 0;

  constructor(options: { maxEntries: number; load: (key: string) => Promise<T | undefined> }) {
    this.#maxEntries = options.maxEntries;
    this.#load = options.load;
  }

  /** The cached value without a load (and without a promise): a hit is marked like get's. */
  peek(key: string): T | undefined {
    const hit = this.#entries.get(key);
    if (hit === undefined) return undefined;
    hit.used = true;
    return hit.value;
  }

  async get(key: string): Promise<T | undefined> {
    const hit = this.#entries.get(key);
    if (hit !== undefined) {
      hit.used = true;
      return hit.value;
    }
    const generation = this.#generation;
    const value = await this.#load(key);
    if (value !== undefined && generation === this.#generation && this.#maxEntries > 0) {
      this.#entries.set(key, { value, used: false });
      this.#evict();
    }
    return value;
  }

  /** Drops the oldest entry not used since it was last passed over; used ones go to the back once. */
  #evict(): void {
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.entries().next();
      if (oldest.done) return;
      const [key, entry] = oldest.value;
      this.#entries.delete(key);
      if (entry.used) {
        entry.used = false;
        this.#entries.set(key, entry);
      }
    }
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
