import type { Executor } from '../db/database.ts';

/**
 * One step of a document's write. `prepare` builds the step's rows outside its transaction, a
 * slice at a time with the event loop free between slices (a block's 1,024 rows with 256-number
 * vectors were 35-70 ms of one synchronous stretch); `run` is the statement.
 */
export interface ChunkWrite {
  prepare(): Promise<void>;
  run(tx: Executor): Promise<void>;
}

/**
 * Runs a document's writes in order, each step's rows built while the step before it runs:
 * building a block's rows is this thread's work (about 150 ms for 1,024 chunks with vectors:
 * their json and their words) and running it the database's (0.2-1 s), and one after the other
 * left this thread idle while the database worked and the reverse. `run` returns false to stop (the claim was lost); the step
 * being built is still awaited, so none is left running.
 */
export async function runChunkWrites(writes: readonly ChunkWrite[], run: (write: ChunkWrite) => Promise<boolean>): Promise<boolean> {
  let next: Promise<void> | undefined = writes[0]?.prepare();
  for (let i = 0; i < writes.length; i++) {
    await next;
    next = writes[i + 1]?.prepare();
    // Awaited on every way out of this turn, so no step is left being built; a failed build is
    // thrown by `await next` in the next turn, not counted as unhandled meanwhile.
    const built = next?.catch(() => undefined);
    try {
      if (!(await run(writes[i]!))) return false;
    } finally {
      await built;
    }
  }
  return true;
}
