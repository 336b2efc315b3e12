/** Raised through a call's signal when its total time ran out. */
export class TotalTimeout extends Error {}

/**
 * One upstream call's abort signal: the caller's signal or the total timeout ends it. Released
 * when the call is over, so nothing outlives it: an AbortSignal.timeout per call stayed alive
 * (3-4 KB each) until its five-minute timer fired, which added up under load.
 */
export function callScope(signal: AbortSignal, totalMs: number) {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new TotalTimeout()), totalMs);
  return {
    signal: controller.signal,
    abort: (reason?: unknown) => controller.abort(reason),
    release: () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}
