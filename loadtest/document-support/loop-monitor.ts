/**
 * Main-thread event-loop delay over a window: perf_hooks.monitorEventLoopDelay (the histogram
 * Node samples with a timer of `resolutionMs`), plus the longest stalls with when they began,
 * so a p99 can be pinned on a phase of the work (upload, parse result, chunking, insert).
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

export interface LoopReport {
  resolutionMs: number;
  windowMs: number;
  samples: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Stalls over STALL_MS: [ms since the window began, length in ms], longest first (at most 20). */
  stalls: [number, number][];
  /** All stalls over STALL_MS: how many, and their summed length in ms. */
  stallCount: number;
  stalledMs: number;
}

const STALL_MS = 20;
const TICK_MS = 5;

export class LoopMonitor {
  readonly #histogram: IntervalHistogram;
  readonly #resolutionMs: number;
  #started = performance.now();
  #stalls: [number, number][] = [];
  #last = performance.now();
  readonly #tick: NodeJS.Timeout;

  constructor(resolutionMs: number) {
    this.#resolutionMs = resolutionMs;
    this.#histogram = monitorEventLoopDelay({ resolution: resolutionMs });
    this.#histogram.enable();
    this.#tick = setInterval(() => {
      const now = performance.now();
      const late = now - this.#last - TICK_MS;
      if (late > STALL_MS) this.#stalls.push([Math.round(this.#last - this.#started), Math.round(late)]);
      this.#last = now;
    }, TICK_MS);
    this.#tick.unref();
  }

  /** Starts a new window. */
  reset(): void {
    this.#histogram.reset();
    this.#stalls = [];
    this.#started = performance.now();
    this.#last = this.#started;
  }

  /** The window so far (values in ms: the histogram's delays beyond the resolution). */
  report(): LoopReport {
    const h = this.#histogram;
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    return {
      resolutionMs: this.#resolutionMs,
      windowMs: Math.round(performance.now() - this.#started),
      samples: h.count,
      p50: ms(h.percentile(50)),
      p90: ms(h.percentile(90)),
      p99: ms(h.percentile(99)),
      max: ms(h.max),
      stalls: [...this.#stalls].sort((a, b) => b[1] - a[1]).slice(0, 20),
      stallCount: this.#stalls.length,
      stalledMs: this.#stalls.reduce((sum, [, ms]) => sum + ms, 0),
    };
  }

  stop(): void {
    this.#histogram.disable();
    clearInterval(this.#tick);
  }
}
