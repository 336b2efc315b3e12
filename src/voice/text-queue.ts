/** Text that arrives in pieces (a line streaming from the model), read once as an async iterable. */
export class TextQueue implements AsyncIterable<string> {
  readonly #pieces: string[] = [];
  #ended = false;
  #wake: (() => void) | null = null;

  push(text: string): void {
    if (this.#ended || text === '') return;
    this.#pieces.push(text);
    this.#wake?.();
  }

  end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string> {
    for (;;) {
      const piece = this.#pieces.shift();
      if (piece !== undefined) {
        yield piece;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = null;
    }
  }
}
