/**
 * Query embeddings by text, for a while: a player repeating a line, or every character in a
 * room answering the same one, costs one call to the embeddings server. Bounded (least recently
 * used entries go first) and owned by one Embedder, so entries never cross models or settings.
 */
export class QueryEmbeddingCache {
  readonly #entries = new Map<string, { vector: number[]; expiresAt: number }>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: { maxEntries: number; ttlMs: number; now?: () => number }) {
    this.#maxEntries = options.maxEntries;
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(text: string): number[] | undefined {
    const entry = this.#entries.get(text);
    if (!entry) return undefined;
    this.#entries.delete(text);
    if (entry.expiresAt <= this.#now()) return undefined;
    this.#entries.set(text, entry); // most recently used last
    return entry.vector;
  }

  set(text: string, vector: number[]): void {
    this.#entries.delete(text);
    this.#entries.set(text, { vector, expiresAt: this.#now() + this.#ttlMs });
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(oldest);
    }
  }
}
