/** Linux /proc readers (who was busy during a run: the server, the load generator or the rest); null where /proc cannot be read. */
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { attempt } from './children.ts';

/** /proc counts CPU in USER_HZ ticks, which is 100 on Linux. */
const HZ = 100;
const read = (path: string): string | null => attempt(() => readFileSync(path, 'utf8'));
const list = (path: string): string[] | null => attempt(() => readdirSync(path));
/**
 * CPU seconds of a process: its threads' nanosecond run times (schedstat) where the kernel has
 * them, else utime + stime in ticks. A thread that ends between listing and reading counts 0,
 * so one window never mixes the two sources.
 */
export function processCpuSeconds(pid: number): number | null {
  const tasks = list(`/proc/${pid}/task`);
  const ns = tasks?.reduce((sum, tid) => sum + (Number(read(`/proc/${pid}/task/${tid}/schedstat`)?.split(' ')[0]) || 0), 0);
  if (ns !== undefined && ns > 0) return ns / 1e9;
  const stat = read(`/proc/${pid}/stat`);
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields?.[11]) + Number(fields?.[12]);
  return Number.isFinite(ticks) ? ticks / HZ : null;
}
/** Busy CPU seconds of the whole machine (all but idle and iowait; guest time is in user/nice). */
function systemBusySeconds(): number | null {
  const [label, ...v] = (read('/proc/stat')?.split('\n', 1)[0] ?? '').trim().split(/\s+/);
  const busy = [0, 1, 2, 5, 6, 7].reduce((sum, i) => sum + Number(v[i] ?? 0), 0);
  return label === 'cpu' && Number.isFinite(busy) ? busy / HZ : null;
}
/** CPU use over one window, in % of one core. bench: this process, the load generator; benchEventLoop: its event-loop utilisation,
 * 0..1 (near 1: the generator itself is saturated); other: the rest of the machine, kernel loopback work included. */
export type CpuWindow = {
  children: Record<string, number | null>; bench: number; benchEventLoop: number; other: number | null; machine: number | null;
};
export type WatchedProcess = { name: string; pid: number };
export const NO_CPU: CpuWindow = { children: {}, bench: 0, benchEventLoop: 0, other: null, machine: null };
export function startCpuWindow(watched: readonly WatchedProcess[]): () => CpuWindow {
  const t0 = performance.now();
  const child0 = watched.map((w) => processCpuSeconds(w.pid));
  const [self0, elu0, sys0] = [process.cpuUsage(), performance.eventLoopUtilization(), systemBusySeconds()];
  return () => {
    const pct = (seconds: number) => (100 * seconds * 1000) / (performance.now() - t0);
    const since = (before: number | null | undefined, after: number | null) => (before == null || after === null ? null : after - before);
    const used = watched.map((w, i) => since(child0[i], processCpuSeconds(w.pid)));
    const children = Object.fromEntries(watched.map((w, i) => [w.name, used[i] == null ? null : pct(used[i])]));
    const childSum = used.includes(null) ? null : used.reduce<number>((sum, u) => sum + (u ?? 0), 0);
    const self = process.cpuUsage(self0);
    const selfSec = (self.user + self.system) / 1e6;
    const machineSec = since(sys0, systemBusySeconds());
    const other = machineSec === null || childSum === null ? null : Math.max(0, pct(machineSec - childSum - selfSec));
    const benchEventLoop = performance.eventLoopUtilization(elu0).utilization;
    return { children, bench: pct(selfSec), benchEventLoop, other, machine: machineSec === null ? null : pct(machineSec) };
  };
}
/** Waits (at most `maxWaitSec`) until the rest of the machine uses < `thresholdPercent` of a core over 1 s: no phase in another's burst. */
export async function waitForQuiet(maxWaitSec: number, thresholdPercent: number, watched: readonly WatchedProcess[]) {
  const t0 = performance.now();
  for (;;) {
    const stop = startCpuWindow(watched);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const otherPercent = stop().other;
    const waitedSec = (performance.now() - t0) / 1000;
    if (otherPercent === null || otherPercent < thresholdPercent || waitedSec >= maxWaitSec) return { otherPercent, waitedSec };
  }
}
/** VmRSS, VmHWM (the peak) and threads of a process from /proc/<pid>/status, in bytes. */
export function processMemory(pid: number): { rss: number; peakRss: number; threads: number } | null {
  const text = read(`/proc/${pid}/status`);
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text ?? '')?.[1] ?? Number.NaN);
  const rss = field('VmRSS') * 1024;
  return Number.isFinite(rss) ? { rss, peakRss: field('VmHWM') * 1024 || rss, threads: field('Threads') } : null;
}
/** The process and its descendants (children of every thread, recursively). */
export function processTree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) {
    for (const task of list(`/proc/${all[i]}/task`) ?? []) {
      all.push(...(read(`/proc/${all[i]}/task/${task}/children`) ?? '').trim().split(/\s+/).filter(Boolean).map(Number));
    }
  }
  return all;
}
export function fileLimits(pid: number | 'self'): { soft: number; hard: number } | null {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(read(`/proc/${pid}/limits`) ?? '');
  const value = (s: string) => (s === 'unlimited' ? Number.POSITIVE_INFINITY : Number(s));
  return m?.[1] && m[2] ? { soft: value(m[1]), hard: value(m[2]) } : null;
}
export const openFileCount = (pid: number): number | null => list(`/proc/${pid}/fd`)?.length ?? null;
/** The largest file-descriptor limit a process may set (fs.nr_open). */
export const maxFileLimit = (): number | null => Number(read('/proc/sys/fs/nr_open')?.trim()) || null;
/** Connections per source address to one server port (net.ipv4.ip_local_port_range). */
export function ephemeralPortCount(): number | null {
  const [low, high] = (read('/proc/sys/net/ipv4/ip_local_port_range') ?? '').trim().split(/\s+/).map(Number);
  return Number.isInteger(low) && Number.isInteger(high) ? (high ?? 0) - (low ?? 0) + 1 : null;
}
/** Whether this process may raise hard limits (CAP_SYS_RESOURCE; root alone is not enough in containers). */
export function canRaiseHardLimits(): boolean {
  const m = /^CapEff:\s+([0-9a-f]+)/m.exec(read('/proc/self/status') ?? '');
  return m?.[1] ? ((BigInt(`0x${m[1]}`) >> 24n) & 1n) === 1n : false;
}
