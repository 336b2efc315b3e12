import { constants, setPriority } from 'node:os';

/**
 * Lowers the calling thread's CPU priority (nice 10) for background work: parsing documents. On
 * a machine with fewer cores than busy threads, the HTTP thread then wins the CPU when a request
 * arrives instead of queueing behind an ingest. (PGlite's thread stays at normal priority: it
 * answers requests too, and would lose the CPU to a game server on the same machine.) Linux
 * only: there a nice value belongs to a thread, elsewhere setPriority would lower the process.
 */
export function runBelowNormalPriority(): void {
  if (process.platform !== 'linux') return;
  try {
    setPriority(0, constants.priority.PRIORITY_BELOW_NORMAL);
  } catch {
    // A sandbox that forbids it leaves the thread as it was: slower to yield, still correct.
  }
}
