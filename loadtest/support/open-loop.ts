/**
 * The open-loop schedule both streaming load generators share: request i starts at
 * t0 + i / (rate * targets) whatever happened to the earlier ones (no coordinated omission), and
 * requests alternate between the targets (request i goes to target i mod n), so each target gets
 * `rate` req/s and all of them live through the same moments of a shared machine. The first
 * `warmupCount` requests are warm-up; the measured window follows.
 */
import { performance } from 'node:perf_hooks';

export interface Schedule {
  /** Targets the requests alternate between. */
  targets: number;
  /** ms between two consecutive requests (any target). */
  interval: number;
  warmupCount: number;
  /** Warm-up and measured requests, all targets. */
  count: number;
  /** performance.now() of request 0. */
  t0: number;
  /** performance.now() bounds of the measured window. */
  windowStart: number;
  windowEnd: number;
}

export function planSchedule(options: { rate: number; targets: number; warmupSec: number; durationSec: number; leadMs: number }): Schedule {
  const n = options.targets;
  const interval = 1000 / (options.rate * n);
  const warmupCount = Math.round(options.rate * options.warmupSec) * n;
  const count = warmupCount + Math.round(options.rate * options.durationSec) * n;
  const t0 = performance.now() + options.leadMs;
  const windowStart = t0 + warmupCount * interval;
  return { targets: n, interval, warmupCount, count, t0, windowStart, windowEnd: windowStart + options.durationSec * 1000 };
}

/**
 * Calls `fire(index, target, scheduled)` for every request of the schedule, as soon as its
 * instant has come (late ones go out at once, in order); resolves after the last one was fired.
 */
export function runSchedule(schedule: Schedule, fire: (index: number, target: number, scheduled: number) => void): Promise<void> {
  const { t0, interval, count, targets } = schedule;
  return new Promise<void>((resolve) => {
    let next = 0;
    const tick = (): void => {
      const now = performance.now();
      while (next < count) {
        const scheduled = t0 + next * interval;
        if (scheduled > now) break;
        fire(next, next % targets, scheduled);
        next++;
      }
      if (next < count) setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()));
      else resolve();
    };
    setTimeout(tick, Math.max(0, t0 - performance.now()));
  });
}

/** A short, stable name for a request error: its errno code, else `error`. */
export function errorKind(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? code.toLowerCase() : 'error';
}
