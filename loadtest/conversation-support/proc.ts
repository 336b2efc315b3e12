/**
 * Small Linux helpers for the conversations benchmark: process memory and limits from /proc,
 * the loopback port budget, the `ulimit -n` wrapper for children, and the wait for other
 * benchmarks (two at once on a 2-core machine ruin both).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { delay } from '../support/children.ts';

const execFileAsync = promisify(execFile);

/** VmRSS (and VmHWM, the peak) of a process in bytes, from /proc/<pid>/status; null when unreadable. */
export function processMemory(pid: number): { rss: number; peakRss: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (field: string): number | null => {
    const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
    return match?.[1] === undefined ? null : Number(match[1]) * 1024;
  };
  const rss = kb('VmRSS');
  if (rss === null) return null;
  return { rss, peakRss: kb('VmHWM') ?? rss };
}

function fileLimits(pid: number | 'self'): { soft: number; hard: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/limits`, 'utf8');
    const match = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(text);
    if (!match?.[1] || !match[2]) return null;
    const value = (s: string) => (s === 'unlimited' ? Number.POSITIVE_INFINITY : Number(s));
    return { soft: value(match[1]), hard: value(match[2]) };
  } catch {
    return null;
  }
}

/** The soft "Max open files" limit of a process, from /proc/<pid>/limits. */
export function openFileLimit(pid: number | 'self'): number | null {
  return fileLimits(pid)?.soft ?? null;
}

/** The hard "Max open files" limit of a process: what it may raise its soft limit to without privileges. */
export function hardFileLimit(pid: number | 'self'): number | null {
  return fileLimits(pid)?.hard ?? null;
}

/** Ephemeral ports the kernel hands out (net.ipv4.ip_local_port_range): connections per source address to one server port. */
export function ephemeralPortCount(): number | null {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low === undefined || high === undefined || !Number.isInteger(low) || !Number.isInteger(high)) return null;
    return high - low + 1;
  } catch {
    return null;
  }
}

/** The largest file-descriptor limit a process may set (fs.nr_open). */
export function maxFileLimit(): number | null {
  try {
    const value = Number(readFileSync('/proc/sys/fs/nr_open', 'utf8').trim());
    return Number.isInteger(value) ? value : null;
  } catch {
    return null;
  }
}

/** Whether this process may raise hard resource limits (CAP_SYS_RESOURCE in its effective set). */
export function canRaiseHardLimits(): boolean {
  try {
    const match = /^CapEff:\s+([0-9a-f]+)/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (!match?.[1]) return false;
    const CAP_SYS_RESOURCE = 24n;
    return ((BigInt(`0x${match[1]}`) >> CAP_SYS_RESOURCE) & 1n) === 1n;
  } catch {
    return false;
  }
}

/** Open file descriptors of a process (entries of /proc/<pid>/fd). */
export function openFileCount(pid: number): number | null {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return null;
  }
}

/**
 * Command and arguments that run `command args...` with `ulimit -n` raised to `limit` first
 * (falling back to the hard limit when raising is not allowed). `exec` keeps the pid, so the
 * pid of the spawned bash is the pid of the program.
 */
export function withFileLimit(limit: number, command: string, args: readonly string[]): { command: string; args: string[] } {
  const script = `ulimit -n ${Math.floor(limit)} 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$0" "$@"`;
  return { command: 'bash', args: ['-c', script, command, ...args] };
}

/** Command lines of other benchmarks that must not run at the same time as this one. */
export const OTHER_BENCHMARKS = ['loadtest/gateway.ts'];

async function othersRunning(): Promise<string[]> {
  const found: string[] = [];
  for (const pattern of OTHER_BENCHMARKS) {
    try {
      const { stdout } = await execFileAsync('pgrep', ['-f', pattern], { timeout: 5_000 });
      const pids = stdout.split('\n').map((s) => s.trim()).filter((s) => s && Number(s) !== process.pid);
      if (pids.length > 0) found.push(`${pattern} (pid ${pids.join(', ')})`);
    } catch {
      // pgrep exits 1 when nothing matches.
    }
  }
  return found;
}

/**
 * Waits until no other benchmark runs, checking every `everySec`, for at most `maxWaitSec`.
 * Returns how long it waited and what it saw last (empty when the machine is free).
 */
export async function waitForOtherBenchmarks(
  maxWaitSec: number,
  everySec: number,
  log: (line: string) => void,
): Promise<{ waitedSec: number; stillRunning: string[] }> {
  const t0 = Date.now();
  for (;;) {
    const running = await othersRunning();
    const waitedSec = (Date.now() - t0) / 1000;
    if (running.length === 0) return { waitedSec, stillRunning: [] };
    if (waitedSec >= maxWaitSec) return { waitedSec, stillRunning: running };
    log(`another benchmark is running (${running.join('; ')}): waiting (${Math.round(waitedSec)} s of at most ${maxWaitSec} s)`);
    await delay(everySec * 1000);
  }
}

/** CLOCK_MONOTONIC in milliseconds (float). */
export function monotonicMillis(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
