/**
 * Preloaded into Troupe (`node [--expose-gc] --import probe.ts src/main.ts`, see troupe.ts); it
 * changes nothing in Troupe. On SIGUSR2 it writes, atomically as JSON to $BENCH_PROBE_FILE: `seq`
 * (the reader knows the answer is fresh), the GC pauses so far as [start µs CLOCK_MONOTONIC, ms,
 * kind], then, after a full GC when --expose-gc is on, the memory figures; with
 * $BENCH_LOOP_RESOLUTION_MS, the event-loop delay since the last signal (`loop`). Imported, it
 * gives LoopMonitor for a server run in the benchmark's own process.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance, PerformanceObserver, type IntervalHistogram } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';

export interface LoopReport {
  resolutionMs: number;
  windowMs: number;
  samples: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Stalls over 20 ms: [ms since the window began, length in ms], longest first (at most 20). */
  stalls: [number, number][];
  stallCount: number;
  stalledMs: number;
}

/** monitorEventLoopDelay over a window, plus the longest stalls with when they began (to pin a p99 on a phase). */
export class LoopMonitor {
  readonly #histogram: IntervalHistogram;
  readonly resolutionMs: number;
  #started = performance.now();
  #last = this.#started;
  #stalls: [number, number][] = [];
  readonly #tick: NodeJS.Timeout;
  constructor(resolutionMs: number) {
    this.resolutionMs = resolutionMs;
    this.#histogram = monitorEventLoopDelay({ resolution: resolutionMs });
    this.#histogram.enable();
    this.#tick = setInterval(() => {
      const now = performance.now();
      if (now - this.#last - 5 > 20) this.#stalls.push([Math.round(this.#last - this.#started), Math.round(now - this.#last - 5)]);
      this.#last = now;
    }, 5).unref();
  }
  /** The window so far (ms), and a new one starts. */
  window(): LoopReport {
    const h = this.#histogram;
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    const report = {
      resolutionMs: this.resolutionMs, windowMs: Math.round(performance.now() - this.#started), samples: h.count,
      p50: ms(h.percentile(50)), p90: ms(h.percentile(90)), p99: ms(h.percentile(99)), max: ms(h.max),
      stalls: [...this.#stalls].sort((a, b) => b[1] - a[1]).slice(0, 20), stallCount: this.#stalls.length, stalledMs: this.#stalls.reduce((sum, [, ms]) => sum + ms, 0),
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
    for (const e of list.getEntries()) gcEvents.push([Math.round(offsetUs + e.startTime * 1000), Math.round(e.duration * 1000) / 1000, (e as { detail?: { kind?: number } }).detail?.kind ?? 0]);
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
    const heap = getHeapStatistics();
    Object.assign(report, { gc: gc !== undefined, ...process.memoryUsage(), mallocedMemory: heap.malloced_memory });
    writeFileSync(`${file}.tmp`, JSON.stringify(report));
    renameSync(`${file}.tmp`, file);
  });
}
