/**
 * Part (c): an open-loop HTTP load generator for whole-response latency, on the schedule of
 * support/open-loop.ts (fixed start instants, requests alternating between the targets). One node:http keep-alive Agent per
 * target; latency runs from handing the request to node:http to the response's last byte.
 * Every response is checked (status and body) by the target's own check.
 */
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { startCpuWindow, type CpuWindow, type WatchedProcess } from '../support/cpu-meter.ts';
import { monotonicUs } from '../support/load.ts';
import { errorKind, planSchedule, runSchedule } from '../support/open-loop.ts';

export interface HttpTarget {
  label: string;
  port: number;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  /** null when the response is right, else what is wrong with it. */
  check: (status: number, body: Buffer) => string | null;
}

export interface RateOptions {
  rate: number;
  warmupSec: number;
  durationSec: number;
  timeoutMs: number;
  maxSockets: number;
  watch: readonly WatchedProcess[];
}

export interface RateRaw {
  target: string;
  rate: number;
  scheduled: number;
  ok: number;
  errors: Record<string, number>;
  errorSamples: Record<string, string>;
  /** Successful measured requests, ms. */
  latency: number[];
  /** How late requests were sent after their scheduled instant, ms. */
  lag: number[];
  /** Scheduled instant of each successful measured request, ms after the window opened (same order as latency). */
  scheduledAt: number[];
  achievedRps: number;
  maxInFlight: number;
  cpu: CpuWindow;
  /** Monotonic µs (the V8 profile clock) of the measured window. */
  monotonicUs: { start: number; end: number };
}

interface Lane {
  target: HttpTarget;
  agent: Agent;
  raw: RateRaw;
  inFlight: number;
  doneInWindow: number;
}

export async function runRate(targets: readonly HttpTarget[], options: RateOptions): Promise<RateRaw[]> {
  const n = targets.length;
  const lanes: Lane[] = targets.map((target) => ({
    target,
    agent: new Agent({ keepAlive: true, maxSockets: options.maxSockets, scheduling: 'lifo' }),
    raw: {
      target: target.label,
      rate: options.rate,
      scheduled: 0,
      ok: 0,
      errors: {},
      errorSamples: {},
      latency: [],
      lag: [],
      scheduledAt: [],
      achievedRps: 0,
      maxInFlight: 0,
      cpu: { children: {}, bench: 0, benchEventLoop: 0, other: null, machine: null },
      monotonicUs: { start: 0, end: 0 },
    },
    inFlight: 0,
    doneInWindow: 0,
  }));
  const schedule = planSchedule({ rate: options.rate, targets: n, warmupSec: options.warmupSec, durationSec: options.durationSec, leadMs: 10 });
  const { warmupCount, windowStart, windowEnd } = schedule;
  let pending = 0;
  let onIdle: (() => void) | null = null;
  let stopCpu: (() => CpuWindow) | null = null;
  let monoStart = 0;

  const fire = (lane: Lane, index: number, scheduled: number): void => {
    const { raw, target } = lane;
    const measured = index >= warmupCount;
    const start = performance.now();
    if (measured) {
      raw.scheduled++;
      raw.lag.push(start - scheduled);
    }
    pending++;
    lane.inFlight++;
    if (lane.inFlight > raw.maxInFlight) raw.maxInFlight = lane.inFlight;
    let settled = false;
    const finish = (failure: { kind: string; detail: string } | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const end = performance.now();
      lane.inFlight--;
      pending--;
      if (failure === null && end >= windowStart && end <= windowEnd) lane.doneInWindow++;
      if (measured) {
        if (failure === null) {
          raw.ok++;
          raw.latency.push(end - start);
          raw.scheduledAt.push(scheduled - windowStart);
        } else {
          raw.errors[failure.kind] = (raw.errors[failure.kind] ?? 0) + 1;
          raw.errorSamples[failure.kind] ??= failure.detail.slice(0, 300);
        }
      }
      if (pending === 0) onIdle?.();
    };
    const req = httpRequest(
      {
        agent: lane.agent,
        host: '127.0.0.1',
        port: target.port,
        method: 'POST',
        path: target.path,
        headers: { ...target.headers, 'content-length': String(target.body.byteLength) },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => {
          const problem = target.check(res.statusCode ?? 0, parts.length === 1 && parts[0] ? parts[0] : Buffer.concat(parts));
          finish(problem === null ? null : { kind: res.statusCode === 200 ? 'bad_body' : `http_${res.statusCode}`, detail: problem });
        });
        res.on('error', (err) => finish({ kind: errorKind(err), detail: err.message }));
        res.on('close', () => finish({ kind: 'closed_early', detail: 'response closed before its end' }));
      },
    );
    const timer = setTimeout(() => {
      finish({ kind: 'timeout', detail: `no complete response within ${options.timeoutMs} ms` });
      req.destroy();
    }, options.timeoutMs);
    req.on('error', (err) => finish({ kind: errorKind(err), detail: err.message }));
    req.end(target.body);
  };

  try {
    await runSchedule(schedule, (index, target, scheduled) => {
      if (index === warmupCount) {
        stopCpu = startCpuWindow(options.watch);
        monoStart = monotonicUs();
      }
      const lane = lanes[target];
      if (lane) fire(lane, index, scheduled);
    });
    const cpu = (stopCpu as (() => CpuWindow) | null)?.() ?? null;
    const monoEnd = monotonicUs();
    if (pending > 0) {
      await new Promise<void>((resolve) => {
        onIdle = resolve;
        setTimeout(resolve, options.timeoutMs + 2_000).unref();
      });
    }
    for (const lane of lanes) {
      lane.raw.achievedRps = lane.doneInWindow / options.durationSec;
      if (cpu) lane.raw.cpu = cpu;
      lane.raw.monotonicUs = { start: monoStart, end: monoEnd };
    }
  } finally {
    for (const lane of lanes) lane.agent.destroy();
  }
  return lanes.map((lane) => lane.raw);
}

/** One request with the body returned, for the pre-flight checks. */
export function requestOnce(target: HttpTarget, timeoutMs: number): Promise<{ status: number; body: Buffer; ms: number }> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: target.port,
        method: 'POST',
        path: target.path,
        headers: { ...target.headers, 'content-length': String(target.body.byteLength) },
        timeout: timeoutMs,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts), ms: performance.now() - start }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${target.label}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(target.body);
  });
}
