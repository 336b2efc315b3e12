/**
 * Chunks of a request body on their way from an engine to a consumer. The engine pushes and
 * pauses its source when `push` returns false; `onDrain` tells it to resume. Ending iteration
 * early stops reading without destroying the connection, so a 413 can still be answered.
 */
export class BodyQueue implements AsyncIterable<Uint8Array> {
  readonly #chunks: Uint8Array[] = [];
  readonly #highWaterMark: number;
  readonly #onDrain: () => void;
  #buffered = 0;
  #ended = false;
  #error: Error | null = null;
  #wake: (() => void) | null = null;
  #iterated = false;

  constructor(options: { highWaterMark: number; onDrain: () => void }) {
    this.#highWaterMark = options.highWaterMark;
    this.#onDrain = options.onDrain;
  }

  /** True while the consumer keeps up; false means pause the source until onDrain. */
  push(chunk: Uint8Array): boolean {
    if (this.#ended || this.#error) return true;
    this.#chunks.push(chunk);
    this.#buffered += chunk.byteLength;
    this.#wakeUp();
    return this.#buffered < this.#highWaterMark;
  }

  end(): void {
    this.#ended = true;
    this.#wakeUp();
  }

  fail(error: Error): void {
    this.#error ??= error;
    this.#wakeUp();
  }

  /** The whole body arrived (or the request has none). */
  get complete(): boolean {
    return this.#ended && this.#chunks.length === 0;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    if (this.#iterated) throw new Error('the request body can be read only once');
    this.#iterated = true;
    for (;;) {
      const chunk = this.#chunks.shift();
      if (chunk) {
        const wasFull = this.#buffered >= this.#highWaterMark;
        this.#buffered -= chunk.byteLength;
        if (wasFull && this.#buffered < this.#highWaterMark) this.#onDrain();
        yield chunk;
        continue;
      }
      if (this.#error) throw this.#error;
      if (this.#ended) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}
