/**
 * The open-loop HTTP load generator: request i starts at t0 + i / (rate * targets) whatever
 * happened to the earlier ones (no coordinated omission), the first warm-up ones unreported, alternating between the targets so each gets `rate` req/s
 * and all live through the same moments of a shared machine. node:http with one keep-alive Agent
 * per target: no dependency and the least client CPU per request (fetch adds web streams).
 *
 * Per measured request it records the time to first content (streams: the first body chunk that
 * carries a non-empty `"content":"`; otherwise the first body bytes) and the total time, both
 * from the moment the request was handed to node:http. A request fails on a non-2xx status, a
 * socket error, the timeout, a reply that is (not) an event stream when the target says otherwise,
 * a stream that does not end with `data: [DONE]`, or the target's own `check` of the body.
 */
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { startCpuWindow, type CpuWindow, type WatchedProcess } from './cpu.ts';

export interface HttpTarget {
  label: string;
  port: number;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** A streamed (SSE) reply: checked for `[DONE]`, first content found in the chunks. */
  stream?: boolean;
  /** null when the whole body is right, else what is wrong (the body is kept only with a check). */
  check?: (body: Buffer) => string | null;
}

export interface LoadOptions {
  /** Requests per second to each target. */
  rate: number;
  warmupSec: number;
  durationSec: number;
  timeoutMs?: number;
  /** Processes whose CPU use is recorded over the measured window. */
  watch?: readonly WatchedProcess[];
  /** Called when the measured window opens and when its last request has ended. */
  onWindow?: (edge: 'start' | 'end') => void;
}

export interface TargetRun {
  label: string;
  rate: number;
  /** Measured requests scheduled. */
  scheduled: number;
  ok: number;
  /** Successful measured requests, in ms, in completion order. */
  ttfc: number[];
  total: number[];
  /** Scheduled instant of each successful measured request, ms after the window opened. */
  scheduledAt: number[];
  errors: Record<string, number>;
  /** One message per error kind. */
  errorSamples: Record<string, string>;
  /** How late requests were handed to node:http after their scheduled time (ms). */
  lag: number[];
  /** Successful completions inside the measured window, per second. */
  achievedRps: number;
  maxInFlight: number;
  /** CPU over the measured window (with `watch`). */
  cpu: CpuWindow | null;
  /** CLOCK_MONOTONIC µs (V8 profiles' clock) of the measured window. */
  monotonicUs: { start: number; end: number };
}

interface Schedule {
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

function planSchedule(options: { rate: number; targets: number; warmupSec: number; durationSec: number; leadMs: number }): Schedule {
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
function runSchedule(schedule: Schedule, fire: (index: number, target: number, scheduled: number) => void): Promise<void> {
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
function errorKind(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code ? code.toLowerCase() : 'error';
}

const CONTENT = Buffer.from('"content":"');
const QUOTE = 0x22;
const DONE = Buffer.from('data: [DONE]');
const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** Whether `buf` holds a non-empty `"content":"` (the role chunk's content is empty). */
function hasContent(buf: Buffer): boolean {
  for (let at = buf.indexOf(CONTENT); at !== -1; at = buf.indexOf(CONTENT, at + 1)) {
    if (buf[at + CONTENT.length] !== QUOTE) return true;
  }
  return false;
}

/** Sends one request; calls `done` once with the failure (or null) and the first-content instant. */
function send(target: HttpTarget, agent: Agent | undefined, timeoutMs: number, done: (failure: string | null, detail: string, first: number, body: Buffer) => void): void {
  let settled = false;
  const settle = (failure: string | null, detail: string, first: number, body = Buffer.alloc(0)): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done(failure, detail, first, body);
  };
  const headers = target.body ? { ...target.headers, 'content-length': String(target.body.byteLength) } : target.headers;
  const req = httpRequest({ host: '127.0.0.1', port: target.port, method: target.method, path: target.path, headers, agent }, (res) => {
    const status = res.statusCode ?? 0;
    const isStream = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
    const wrong = status < 200 || status > 299 || isStream !== (target.stream === true);
    const keep: Buffer[] | null = wrong || target.check ? [] : null;
    let first = 0;
    let tail: Buffer = Buffer.alloc(0);
    res.on('data', (buf: Buffer) => {
      keep?.push(buf);
      if (wrong) return;
      if (first === 0 && (!target.stream || hasContent(buf))) first = performance.now();
      // Only the end matters: keep the last chunk (joined with the one before when it is short).
      if (target.stream) tail = buf.length >= DONE.length + 4 ? buf : Buffer.concat([tail, buf]);
    });
    res.on('end', () => {
      const body = keep ? Buffer.concat(keep) : Buffer.alloc(0);
      if (status < 200 || status > 299) return settle(`http_${status}`, body.toString('utf8'), 0, body);
      if (wrong) return settle(isStream ? 'unexpected_stream' : 'not_a_stream', body.toString('utf8'), 0, body);
      if (target.stream && tail.indexOf(DONE) === -1) return settle('no_done', tail.toString('utf8'), 0, body);
      const problem = target.check?.(body) ?? null;
      settle(problem === null ? null : 'bad_body', problem ?? '', first || performance.now(), body);
    });
    res.on('error', (err) => settle(errorKind(err), err.message, 0));
    res.on('close', () => settle('closed_early', 'response closed before its end', 0));
  });
  const timer = setTimeout(() => {
    settle('timeout', `no end within ${timeoutMs} ms`, 0);
    req.destroy();
  }, timeoutMs);
  req.on('error', (err) => settle(errorKind(err), err.message, 0));
  req.end(target.body);
}

/** One request with its body, for pre-flight checks. */
export function requestOnce(target: HttpTarget, timeoutMs = 15_000): Promise<{ failure: string | null; detail: string; body: Buffer; ms: number }> {
  const start = performance.now();
  return new Promise((resolve) => send(target, undefined, timeoutMs, (failure, detail, _first, body) => resolve({ failure, detail, body, ms: performance.now() - start })));
}

export async function runLoad(targets: readonly HttpTarget[], options: LoadOptions): Promise<TargetRun[]> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const runs: TargetRun[] = targets.map((t) => ({
    label: t.label, rate: options.rate, scheduled: 0, ok: 0, ttfc: [], total: [], scheduledAt: [], errors: {}, errorSamples: {}, lag: [],
    achievedRps: 0, maxInFlight: 0, cpu: null, monotonicUs: { start: 0, end: 0 },
  }));
  const inFlight = targets.map(() => 0);
  const doneInWindow = targets.map(() => 0);
  const agents = targets.map(() => new Agent({ keepAlive: true, maxSockets: 4096, scheduling: 'lifo' }));
  const schedule = planSchedule({ rate: options.rate, targets: targets.length, warmupSec: options.warmupSec, durationSec: options.durationSec, leadMs: 5 });
  const { warmupCount, windowStart, windowEnd } = schedule;
  const window: { stopCpu: (() => CpuWindow) | null; start: number } = { stopCpu: null, start: 0 };
  let pending = 0;
  let fired = 0;
  let allDone: () => void = () => {};
  const finished = new Promise<void>((resolve) => (allDone = resolve));

  await runSchedule(schedule, (index, which, scheduled) => {
    fired++;
    const target = targets[which];
    const run = runs[which];
    if (!target || !run) return;
    const measured = index >= warmupCount;
    if (index === warmupCount) {
      options.onWindow?.('start');
      window.stopCpu = options.watch ? startCpuWindow(options.watch) : null;
      window.start = monotonicUs();
    }
    const start = performance.now();
    if (measured) {
      run.scheduled++;
      run.lag.push(start - scheduled);
    }
    pending++;
    inFlight[which] = (inFlight[which] ?? 0) + 1;
    run.maxInFlight = Math.max(run.maxInFlight, inFlight[which] ?? 0);
    send(target, agents[which], timeoutMs, (failure, detail, first) => {
      const end = performance.now();
      inFlight[which] = (inFlight[which] ?? 1) - 1;
      if (failure === null && end >= windowStart && end <= windowEnd) doneInWindow[which] = (doneInWindow[which] ?? 0) + 1;
      if (measured && failure === null) {
        run.ok++;
        run.ttfc.push(first - start);
        run.total.push(end - start);
        run.scheduledAt.push(scheduled - windowStart);
      } else if (measured && failure !== null) {
        run.errors[failure] = (run.errors[failure] ?? 0) + 1;
        run.errorSamples[failure] ??= detail.slice(0, 300);
      }
      if (--pending === 0 && fired === schedule.count) allDone();
    });
  });
  const cpu = window.stopCpu?.() ?? null;
  const monotonicEnd = monotonicUs();
  if (pending > 0) await finished;
  options.onWindow?.('end');
  runs.forEach((run, i) => {
    run.achievedRps = (doneInWindow[i] ?? 0) / options.durationSec;
    run.cpu = cpu;
    run.monotonicUs = { start: window.start, end: monotonicEnd };
  });
  for (const agent of agents) agent.destroy();
  return runs;
}
