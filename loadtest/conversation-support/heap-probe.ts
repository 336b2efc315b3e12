/**
 * Preloaded into Troupe by the conversations benchmark (`node --expose-gc --import <this file>
 * src/main.ts`): it changes nothing in Troupe, it only answers SIGUSR2 with a full GC (when
 * --expose-gc is on) followed by the process's memory figures, written atomically as JSON to
 * $BENCH_HEAP_PROBE_FILE. `seq` counts the signals, so the reader knows the answer is fresh.
 * It also records every GC pause (PerformanceObserver), as [start on CLOCK_MONOTONIC in µs,
 * duration in ms, kind], so the benchmark can tell which latency outliers were GC pauses.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';

const file = process.env.BENCH_HEAP_PROBE_FILE;
if (file) {
  let seq = 0;
  const gcEvents: [number, number, number][] = [];
  const MAX_GC_EVENTS = 50_000;
  const observer = new PerformanceObserver((list) => {
    // performance.now() runs on the monotonic clock too: shift entry times onto hrtime µs.
    const offsetUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
    for (const entry of list.getEntries()) {
      const kind = (entry as { detail?: { kind?: number } }).detail?.kind ?? 0;
      gcEvents.push([Math.round(offsetUs + entry.startTime * 1000), Math.round(entry.duration * 1000) / 1000, kind]);
    }
    if (gcEvents.length > MAX_GC_EVENTS) gcEvents.splice(0, gcEvents.length - MAX_GC_EVENTS);
  });
  observer.observe({ entryTypes: ['gc'] });
  process.on('SIGUSR2', () => {
    seq++;
    const gc = (globalThis as { gc?: () => void }).gc;
    // GC pauses up to now: the forced collections below are the benchmark's, not Troupe's.
    const pauses = gcEvents.slice();
    const collected = typeof gc === 'function';
    if (collected) {
      // Twice: the first pass can leave objects that only become garbage after finalizers ran.
      gc();
      gc();
    }
    const mem = process.memoryUsage();
    const heap = getHeapStatistics();
    const report = {
      seq,
      gc: collected,
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      heapTotal: mem.heapTotal,
      external: mem.external,
      arrayBuffers: mem.arrayBuffers,
      totalHeapSize: heap.total_heap_size,
      usedHeapSize: heap.used_heap_size,
      mallocedMemory: heap.malloced_memory,
      nativeContexts: heap.number_of_native_contexts,
      gcEvents: pauses,
    };
    const tmp = `${file}.tmp`;
    writeFileSync(tmp, JSON.stringify(report));
    renameSync(tmp, file);
  });
}
