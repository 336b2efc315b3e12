// Starting PGlite's worker thread (pglite-worker.ts) and pacing the starts that replace one that
// died. The client that talks to the running thread is pglite-thread-client.ts.
import { Worker } from 'node:worker_threads';
import { PgliteThreadError, type Reply, type WorkerData } from './pglite-protocol.ts';

/** Starts pglite-worker.ts; tests pass their own to hold (and kill) the Worker. */
export type SpawnWorker = (data: WorkerData) => Worker;

// Node strips the types of a .ts worker itself, as it does for the main thread.
export const spawnPgliteWorker: SpawnWorker = (workerData) => new Worker(new URL('./pglite-worker.ts', import.meta.url), { workerData });

/** Resolves once PGlite is open in `worker`; rejects (and ends the worker) when it cannot open. */
export function whenReady(worker: Worker, location: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const settle = (err: Error | null) => {
      worker.off('message', onMessage);
      worker.off('error', failed);
      worker.off('exit', onExit);
      if (!err) return resolve();
      void worker.terminate();
      reject(err);
    };
    const failed = (err: Error) => settle(err);
    const onMessage = (reply: Reply) => {
      if (reply.kind === 'ready') settle(null);
      else if (reply.kind === 'startFailed') {
        settle(Object.assign(new PgliteThreadError(reply.error), { message: `PGlite could not open ${location}: ${reply.error.message}` }));
      }
    };
    const onExit = (code: number) => settle(new Error(`PGlite's worker thread stopped while opening ${location} (exit code ${code})`));
    worker.on('message', onMessage);
    worker.on('error', failed);
    worker.on('exit', onExit);
  });
}

/** A worker that answered this long counts as healthy: its death starts the backoff afresh. */
export const STABLE_RUN_MS = 30_000;
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;

/**
 * How long to wait before starting worker number `failures` in a row that died (or could not
 * open) without a stable run: the first at once, then 0.5 s doubling up to 30 s, so a data
 * directory that crashes PGlite on every start costs a start per 30 s, not a spinning core.
 */
export function restartDelayMs(failures: number): number {
  if (failures <= 1) return 0;
  return Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (failures - 2));
}
