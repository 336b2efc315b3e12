/**
 * Upkeep that runs one at a time per key: a call while a run is going shares it and asks for
 * one more run after it (whatever it asked about may have been read already), so any number of
 * calls meanwhile cost one further run.
 */
export class CoalescedRuns {
  readonly #running = new Map<string, { done: Promise<void>; again: boolean }>();

  run(key: string, work: () => Promise<void>): Promise<void> {
    const running = this.#running.get(key);
    if (running) {
      running.again = true;
      return running.done;
    }
    const entry = { done: Promise.resolve(), again: false };
    entry.done = (async () => {
      try {
        do {
          entry.again = false;
          await work();
        } while (entry.again);
      } finally {
        this.#running.delete(key);
      }
    })();
    this.#running.set(key, entry);
    return entry.done;
  }
}
