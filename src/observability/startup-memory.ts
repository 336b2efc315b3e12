// Start-up (module compilation, migrations, the first queries) leaves V8 with a young generation
// grown to tens of MB and freed pages it keeps for reuse: idle RSS stayed about 80 MB above the
// live heap. One memory-reducing collection once everything is built hands that back to the OS.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

interface GcOptions {
  type: 'major';
  /** 'last-resort': V8's repeated full collections that also shrink the young generation and release pooled pages. */
  flavor: 'last-resort';
}
type Gc = (options: GcOptions) => void;

/**
 * Runs V8's memory-reducing full collection (about 50-250 ms on a fresh server) and returns how
 * long it took, or null when this V8 offers no gc(). Call it once, after start-up, never on a
 * request path.
 */
export function releaseStartupMemory(): number | null {
  const started = performance.now();
  // Node exposes no GC call without --expose-gc; the flag applies to contexts created after it,
  // so a throwaway context hands over the function. The flag is turned off again at once.
  setFlagsFromString('--expose-gc');
  let gc: unknown;
  try {
    gc = runInNewContext('gc');
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  if (typeof gc !== 'function') return null;
  (gc as Gc)({ type: 'major', flavor: 'last-resort' });
  return performance.now() - started;
}
