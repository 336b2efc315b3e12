/** Preloaded into Troupe (`--import`), changing nothing in it: on SIGUSR2, atomically to $BENCH_PROBE_FILE, `seq` (so the reader
 * knows it is fresh), GC pauses [start µs CLOCK_MONOTONIC, ms, kind], memory (after a full GC with --expose-gc) and, with
 * $BENCH_LOOP_RESOLUTION_MS, the event-loop delay since the last signal. Imported, it gives LoopMonitor. */
import { renameSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';

export type LoopReport = ReturnType<LoopMonitor['window']>;
/** monitorEventLoopDelay over a window, plus the longest stalls (over 20 ms) with when they began, to pin a p99 on a phase. */
export class LoopMonitor {
  readonly resolutionMs: number;
  readonly #histogram;
  #started = performance.now();
  #last = this.#started;
  /** [ms since the window began, length in ms] */
  #stalls: [number, number][] = [];
  readonly #tick = setInterval(() => {
    const now = performance.now();
    if (now - this.#last - 5 > 20) this.#stalls.push([Math.round(this.#last - this.#started), Math.round(now - this.#last - 5)]);
    this.#last = now;
  }, 5).unref();
  constructor(resolutionMs: number) {
    this.resolutionMs = resolutionMs;
    this.#histogram = monitorEventLoopDelay({ resolution: resolutionMs });
    this.#histogram.enable();
  }
  /** The window so far (ms; the 20 longest stalls first), and a new one starts. */
  window() {
    const h = this.#histogram;
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    const report = {
      resolutionMs: this.resolutionMs, windowMs: Math.round(performance.now() - this.#started), samples: h.count,
      p50: ms(h.percentile(50)), p90: ms(h.percentile(90)), p99: ms(h.percentile(99)), max: ms(h.max),
      stalls: [...this.#stalls].sort((a, b) => b[1] - a[1]).slice(0, 20), stallCount: this.#stalls.length,
      stalledMs: this.#stalls.reduce((sum, [, ms]) => sum + ms, 0),
    };
    h.reset();
    this.#stalls = [];
    this.#last = this.#started = performance.now();
    return report;
  }
  stop(): void {
    this.#histogram.disable();
    clearInterval(this.#tick);
  }
}
const file = process.env.BENCH_PROBE_FILE;
if (file) {
  let seq = 0;
  const gcEvents: [number, number, number][] = [];
  new PerformanceObserver((list) => {
    // performance.now() runs on the monotonic clock too: shift entry times onto hrtime µs.
    const offsetUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
    for (const e of list.getEntries()) {
      const kind = (e as { detail?: { kind?: number } }).detail?.kind ?? 0;
      gcEvents.push([Math.round(offsetUs + e.startTime * 1000), Math.round(e.duration * 1000) / 1000, kind]);
    }
    if (gcEvents.length > 50_000) gcEvents.splice(0, gcEvents.length - 50_000);
  }).observe({ entryTypes: ['gc'] });
  const loop = process.env.BENCH_LOOP_RESOLUTION_MS ? new LoopMonitor(Number(process.env.BENCH_LOOP_RESOLUTION_MS)) : null;
  process.on('SIGUSR2', () => {
    // The pauses up to now first: the forced collections below are the benchmark's, not Troupe's.
    const report: Record<string, unknown> = { seq: ++seq, gcEvents: gcEvents.slice(), loop: loop?.window() ?? null };
    const gc = (globalThis as { gc?: () => void }).gc;
    // Twice: the first pass can leave objects that only become garbage after finalizers ran.
    gc?.();
    gc?.();
    Object.assign(report, { gc: gc !== undefined, ...process.memoryUsage(), mallocedMemory: getHeapStatistics().malloced_memory });
    writeFileSync(`${file}.tmp`, JSON.stringify(report));
    renameSync(`${file}.tmp`, file);
  });
}
