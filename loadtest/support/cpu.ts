import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/**
 * CPU accounting from /proc (Linux), to tell who was busy during a run: the server, the load
 * generator, or something else on the machine. Everything returns null where /proc is missing.
 * Times are in seconds; /proc counts in USER_HZ ticks, which is 100 on Linux.
 */
const HZ = 100;

/** utime + stime of one process. */
export function processCpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks / HZ : null;
  } catch {
    return null;
  }
}

/** Busy CPU seconds of the whole machine, summed over all CPUs (everything but idle and iowait). */
function systemBusySeconds(): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    const [label, ...rest] = line.trim().split(/\s+/);
    if (label !== 'cpu') return null;
    // user nice system idle iowait irq softirq steal (guest times are already in user/nice).
    const v = rest.slice(0, 8).map(Number);
    const busy = (v[0] ?? 0) + (v[1] ?? 0) + (v[2] ?? 0) + (v[5] ?? 0) + (v[6] ?? 0) + (v[7] ?? 0);
    return Number.isFinite(busy) ? busy / HZ : null;
  } catch {
    return null;
  }
}

/** CPU use over one measured window, in % of one core (200% = both cores of a 2-core machine). */
export interface CpuWindow {
  /** Per watched child process, by name. */
  children: Record<string, number | null>;
  /** This process: the load generator (and the drain of the children's stdout). */
  bench: number;
  /** Event-loop utilisation of this process, 0..1: near 1 means the generator itself is saturated. */
  benchEventLoop: number;
  /** Everything else on the machine, kernel loopback work included. */
  other: number | null;
  /** Whole machine. */
  machine: number | null;
}

export interface WatchedProcess {
  name: string;
  pid: number;
}

export function startCpuWindow(watched: readonly WatchedProcess[]): () => CpuWindow {
  const t0 = performance.now();
  const child0 = watched.map((w) => processCpuSeconds(w.pid));
  const self0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const sys0 = systemBusySeconds();
  return () => {
    const wallSec = (performance.now() - t0) / 1000;
    const pct = (seconds: number) => (100 * seconds) / wallSec;
    const children: Record<string, number | null> = {};
    let childSum = 0;
    let childKnown = true;
    watched.forEach((w, i) => {
      const before = child0[i];
      const after = processCpuSeconds(w.pid);
      if (before === null || before === undefined || after === null) {
        children[w.name] = null;
        childKnown = false;
        return;
      }
      children[w.name] = pct(after - before);
      childSum += after - before;
    });
    const self = process.cpuUsage(self0);
    const selfSec = (self.user + self.system) / 1e6;
    const sys1 = systemBusySeconds();
    const machineSec = sys0 === null || sys1 === null ? null : sys1 - sys0;
    return {
      children,
      bench: pct(selfSec),
      benchEventLoop: performance.eventLoopUtilization(elu0).utilization,
      other: machineSec === null || !childKnown ? null : Math.max(0, pct(machineSec - childSum - selfSec)),
      machine: machineSec === null ? null : pct(machineSec),
    };
  };
}

/**
 * On a shared machine: waits (at most `maxWaitSec`) until the rest of the machine uses less than
 * `thresholdPercent` of a core over one second, so a phase does not start in the middle of
 * someone else's burst. Returns the last sample and how long it waited; with maxWaitSec 0 it
 * only samples.
 */
export async function waitForQuiet(maxWaitSec: number, thresholdPercent: number, watched: readonly WatchedProcess[]): Promise<{ otherPercent: number | null; waitedSec: number }> {
  const t0 = performance.now();
  for (;;) {
    const stop = startCpuWindow(watched);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const other = stop().other;
    const waitedSec = (performance.now() - t0) / 1000;
    if (other === null || other < thresholdPercent || waitedSec >= maxWaitSec) return { otherPercent: other, waitedSec };
  }
}
