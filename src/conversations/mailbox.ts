/**
 * The ordering half of a conversation actor: work for one conversation runs one item at a
 * time, in arrival order, whichever surface it came from. Idle conversations hold no memory.
 */
export class Mailbox {
  readonly #tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const result = previous.then(work, work);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** Conversations with work queued or running. */
  get active(): number {
    return this.#tails.size;
  }
}
