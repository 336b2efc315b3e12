import { readFileSync } from 'node:fs';

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
export function systemBusySeconds(): number | null {
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

export interface CpuShares {
  /** % of one core used by the server child. */
  serverPercent: number | null;
  /** % of one core used by this process (autocannon and the stdout drain). */
  benchPercent: number;
  /** % of one core used by everything else on the machine (other jobs skew the numbers). */
  otherPercent: number | null;
}

/** Starts measuring; call the returned function when the run is over. */
export function startCpuMeter(serverPid: number | undefined): () => CpuShares {
  const t0 = process.hrtime.bigint();
  const server0 = processCpuSeconds(serverPid);
  const bench0 = process.cpuUsage();
  const system0 = systemBusySeconds();
  return () => {
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const server1 = processCpuSeconds(serverPid);
    const benchUsage = process.cpuUsage(bench0);
    const system1 = systemBusySeconds();
    const server = server0 === null || server1 === null ? null : server1 - server0;
    const bench = (benchUsage.user + benchUsage.system) / 1e6;
    const system = system0 === null || system1 === null ? null : system1 - system0;
    const pct = (seconds: number) => (100 * seconds) / wall;
    return {
      serverPercent: server === null ? null : pct(server),
      benchPercent: pct(bench),
      otherPercent: system === null || server === null ? null : Math.max(0, pct(system - server - bench)),
    };
  };
}

/** % of one core the machine is busy with while this process sleeps: the background load. */
export async function sampleBackgroundPercent(ms: number): Promise<number | null> {
  const before = systemBusySeconds();
  const self0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = systemBusySeconds();
  const self = process.cpuUsage(self0);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  if (before === null || after === null) return null;
  return Math.max(0, (100 * (after - before - (self.user + self.system) / 1e6)) / wall);
}
