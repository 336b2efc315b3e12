/**
 * Preloaded into a Troupe child by the documents benchmark (`node --import <this file>
 * src/main.ts`); it changes nothing in Troupe. With $BENCH_LOOP_PROBE_FILE set it monitors the
 * main thread's event-loop delay (loop-monitor.ts, resolution $BENCH_LOOP_RESOLUTION_MS) and
 * answers each SIGUSR2 by writing the window so far, atomically as JSON, to that file, then
 * starting a new window. `seq` counts the signals, so the reader knows the answer is fresh.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { LoopMonitor } from './loop-monitor.ts';

const file = process.env.BENCH_LOOP_PROBE_FILE;
if (file) {
  const monitor = new LoopMonitor(Number(process.env.BENCH_LOOP_RESOLUTION_MS ?? '2'));
  let seq = 0;
  process.on('SIGUSR2', () => {
    seq++;
    const report = { seq, ...monitor.report() };
    monitor.reset();
    writeFileSync(`${file}.tmp`, JSON.stringify(report));
    renameSync(`${file}.tmp`, file);
  });
}
