/**
 * Open-loop load generator for streamed chat completions: requests start on a fixed schedule
 * (support/open-loop.ts) whatever happened to the earlier ones, so a slow server meets a
 * growing backlog instead of a politely waiting client (no coordinated omission).
 *
 * The client is node:http with a keep-alive Agent: no dependency, the least CPU per request of
 * the clients at hand (this process shares two cores with the upstream and Troupe; fetch adds
 * web streams, and the openai SDK adds those plus its SSE decoder and a JSON.parse per chunk,
 * which is what Troupe itself runs, so timing with it would charge the client the very costs
 * we want to see in Troupe), and the response's `data` events give each chunk's arrival time
 * with no stream-parsing layer in between.
 *
 * Every request sends the same bytes but for a fixed-width tag in `user` (see reply.ts). TTFC
 * is measured to the first body bytes (the first SSE event) and total time to the end of the
 * response, both from the moment the request was handed to node:http. Every response is
 * checked (status, SSE event count, final `[DONE]`); every `validateEvery`-th one is parsed in
 * full and its text compared.
 */
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { monotonicUs } from '../support/load.ts';
import { errorKind, planSchedule, runSchedule } from '../support/open-loop.ts';
import { startCpuWindow, type CpuWindow, type WatchedProcess } from '../support/cpu-meter.ts';
import { monotonicMs, parseSse, requestTag } from './reply.ts';

/** performance.now() and process.hrtime share libuv's monotonic clock: this maps one onto the other. */
const MONOTONIC_OFFSET_MS = monotonicMs() - performance.now();
let nextTag = 0;

export interface StreamTarget {
  /** e.g. `direct` or `troupe`. */
  label: string;
  port: number;
  path: string;
  /** Without content-length: it is set per request. */
  headers: Record<string, string>;
  /** The request body carrying this request's tag (every tag has the same width). */
  body: (tag: string) => Buffer;
}

export interface PhaseOptions {
  /** Requests per second to each target. */
  rate: number;
  /** Seconds of load before the measured window; those requests are not reported. */
  warmupSec: number;
  durationSec: number;
  requestTimeoutMs: number;
  maxSockets: number;
  /** SSE events (with the final [DONE]) every response must carry. */
  expectedEvents: number;
  expectedText: string;
  /** Parse every n-th response in full (0: never). */
  validateEvery: number;
  /** Processes whose CPU use is recorded during the measured window. */
  watch: readonly WatchedProcess[];
}

export interface PhaseRaw {
  target: string;
  rate: number;
  /** Measured requests: scheduled inside the measured window. */
  scheduled: number;
  ok: number;
  errors: Record<string, number>;
  errorCount: number;
  /** One message per error kind, for the report. */
  errorSamples: Record<string, string>;
  warmupErrors: number;
  /** Successful measured requests, in completion order (ms). */
  ttfc: number[];
  total: number[];
  /** Scheduled start of each successful measured request, ms after the measured window opened. */
  scheduledAt: number[];
  /** How late each measured request was handed to node:http after its scheduled time (ms). */
  lag: number[];
  /**
   * Per successful measured request, same order as ttfc: its tag and its send, first-byte and
   * end instants on the monotonic clock (ms), to join with the upstream's timings.
   */
  marks: { tag: string; sent: number; first: number; end: number }[];
  /** Successful completions (any request) inside the measured window, per second. */
  achievedRps: number;
  maxInFlight: number;
  validated: number;
  cpu: CpuWindow;
  /** Monotonic µs (V8 profile clock) of the measured window, to the last measured completion. */
  monotonicUs: { start: number; end: number };
  wallMs: number;
}

const DONE_TAIL = Buffer.from('data: [DONE]\n\n');
const LF = 0x0a;

interface Flight {
  start: number;
  measured: boolean;
  settled: boolean;
  abort: (reason: string) => void;
}

/** Per-target bookkeeping inside one phase. */
interface Lane {
  target: StreamTarget;
  raw: PhaseRaw;
  agent: Agent;
  inFlight: Set<Flight>;
  completedInWindow: number;
  lastMeasuredEnd: number;
}

/**
 * Runs warmup + measured window as one continuous schedule. With several targets the requests
 * alternate between them (request i goes to target i mod n), each target getting `rate` req/s,
 * so every target sees the same moments of the machine: bursts of other work on a shared
 * machine then hit all of them alike instead of whichever ran at that time.
 */
export async function runPhase(targets: readonly StreamTarget[], options: PhaseOptions): Promise<PhaseRaw[]> {
  if (targets.length === 0) return [];
  const lanes: Lane[] = targets.map((target) => ({
    target,
    raw: emptyRaw(target.label, options.rate),
    agent: new Agent({ keepAlive: true, maxSockets: options.maxSockets, scheduling: 'lifo', keepAliveMsecs: 1_000 }),
    inFlight: new Set<Flight>(),
    completedInWindow: 0,
    lastMeasuredEnd: 0,
  }));
  const n = lanes.length;
  const schedule = planSchedule({ rate: options.rate, targets: n, warmupSec: options.warmupSec, durationSec: options.durationSec, leadMs: 5 });
  const { warmupCount, count, windowStart, windowEnd } = schedule;
  for (const lane of lanes) lane.raw.scheduled = (count - warmupCount) / n;
  const meter: { stop: (() => CpuWindow) | null; monotonicStart: number } = { stop: null, monotonicStart: 0 };
  let pending = 0;
  let allSettled: (() => void) | null = null;

  const settle = (lane: Lane, flight: Flight): void => {
    flight.settled = true;
    lane.inFlight.delete(flight);
    pending--;
    if (pending === 0) allSettled?.();
  };

  const fail = (lane: Lane, flight: Flight, kind: string, detail: string): void => {
    if (flight.settled) return;
    const raw = lane.raw;
    if (!flight.measured) {
      raw.warmupErrors++;
    } else {
      raw.errorCount++;
      raw.errors[kind] = (raw.errors[kind] ?? 0) + 1;
      raw.errorSamples[kind] ??= detail.slice(0, 300);
      lane.lastMeasuredEnd = Math.max(lane.lastMeasuredEnd, performance.now());
    }
    settle(lane, flight);
  };

  const fire = (lane: Lane, index: number, scheduled: number): void => {
    const { raw, target } = lane;
    const tag = requestTag(nextTag++);
    const body = target.body(tag);
    const start = performance.now();
    const measured = index >= warmupCount;
    if (measured) raw.lag.push(start - scheduled);
    const sequence = Math.floor(index / n);
    const collect = options.validateEvery > 0 && measured && sequence % options.validateEvery === 0 ? ([] as Buffer[]) : null;
    let first = 0;
    let events = 0;
    let lastByte = 0;
    let tail: Buffer = Buffer.alloc(0);
    const flight: Flight = {
      start,
      measured,
      settled: false,
      abort: (reason) => {
        fail(lane, flight, reason, `${reason} after ${(performance.now() - start).toFixed(0)} ms`);
        req.destroy();
      },
    };
    lane.inFlight.add(flight);
    pending++;
    if (lane.inFlight.size > raw.maxInFlight) raw.maxInFlight = lane.inFlight.size;

    const onResponse = (res: IncomingMessage): void => {
      if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => fail(lane, flight, `http_${res.statusCode}`, Buffer.concat(parts).toString('utf8')));
        res.on('error', (err) => fail(lane, flight, `http_${res.statusCode}`, err.message));
        return;
      }
      res.on('data', (buf: Buffer) => {
        if (first === 0) first = performance.now();
        if (lastByte === LF && buf[0] === LF) events++;
        for (let at = buf.indexOf('\n\n'); at !== -1; at = buf.indexOf('\n\n', at + 2)) events++;
        lastByte = buf[buf.length - 1] ?? lastByte;
        tail = buf.length >= DONE_TAIL.length ? buf : Buffer.concat([tail, buf]).subarray(-DONE_TAIL.length);
        collect?.push(buf);
      });
      res.on('end', () => {
        if (flight.settled) return;
        const end = performance.now();
        if (events !== options.expectedEvents || !tail.subarray(-DONE_TAIL.length).equals(DONE_TAIL)) {
          const got = collect ? Buffer.concat(collect).toString('utf8').slice(-300) : tail.toString('utf8');
          return fail(lane, flight, 'bad_stream', `${events} SSE events (expected ${options.expectedEvents}), ends with ${JSON.stringify(got)}`);
        }
        if (collect) {
          const parsed = parseSse(Buffer.concat(collect).toString('utf8'));
          raw.validated++;
          const why = parsed.problem
            ?? (parsed.text !== options.expectedText ? `text differs: ${JSON.stringify(parsed.text.slice(0, 80))}` : null)
            ?? (parsed.finishReason !== 'stop' ? `finish_reason ${String(parsed.finishReason)}` : null)
            ?? (parsed.usage ? null : 'no usage chunk');
          if (why) return fail(lane, flight, 'invalid_content', why);
        }
        if (end >= windowStart && end <= windowEnd) lane.completedInWindow++;
        if (flight.measured) {
          raw.ok++;
          raw.ttfc.push(first - start);
          raw.total.push(end - start);
          raw.scheduledAt.push(scheduled - windowStart);
          raw.marks.push({ tag, sent: start + MONOTONIC_OFFSET_MS, first: first + MONOTONIC_OFFSET_MS, end: end + MONOTONIC_OFFSET_MS });
          if (end > lane.lastMeasuredEnd) lane.lastMeasuredEnd = end;
        }
        settle(lane, flight);
      });
      res.on('error', (err) => fail(lane, flight, errorKind(err), err.message));
      res.on('close', () => fail(lane, flight, 'closed_early', `response closed after ${events} events`));
    };

    const req = httpRequest(
      { agent: lane.agent, host: '127.0.0.1', port: target.port, method: 'POST', path: target.path, headers: { ...target.headers, 'content-length': String(body.byteLength) } },
      onResponse,
    );
    req.on('error', (err) => fail(lane, flight, errorKind(err), err.message));
    req.end(body);
  };

  // Requests that outlive the timeout are cut; one sweep timer, not one timer per request.
  const sweeper = setInterval(() => {
    const cutoff = performance.now() - options.requestTimeoutMs;
    for (const lane of lanes) for (const flight of lane.inFlight) if (flight.start < cutoff) flight.abort('timeout');
  }, 250);

  let cpu: CpuWindow = { children: {}, bench: 0, benchEventLoop: 0, other: null, machine: null };
  try {
    await runSchedule(schedule, (index, target, scheduled) => {
      if (index === warmupCount) {
        meter.stop = startCpuWindow(options.watch);
        meter.monotonicStart = monotonicUs();
      }
      const lane = lanes[target];
      if (lane) fire(lane, index, scheduled);
    });
    // The CPU window covers the measured schedule, the part where the offered load is steady.
    if (meter.stop) cpu = meter.stop();
    if (pending > 0) {
      await new Promise<void>((resolve) => {
        allSettled = resolve;
        // Belt and braces: the sweeper times every request out, this bounds the wait regardless.
        setTimeout(resolve, options.requestTimeoutMs + 2_000).unref();
      });
    }
  } finally {
    clearInterval(sweeper);
    for (const lane of lanes) {
      for (const flight of [...lane.inFlight]) flight.abort('abandoned');
      lane.agent.destroy();
    }
  }
  return lanes.map((lane) => {
    const raw = lane.raw;
    raw.achievedRps = lane.completedInWindow / options.durationSec;
    raw.cpu = cpu;
    raw.wallMs = (lane.lastMeasuredEnd || performance.now()) - windowStart;
    raw.monotonicUs = { start: meter.monotonicStart, end: meter.monotonicStart + Math.round(raw.wallMs * 1000) };
    return raw;
  });
}

function emptyRaw(target: string, rate: number): PhaseRaw {
  return {
    target,
    rate,
    scheduled: 0,
    ok: 0,
    errors: {},
    errorCount: 0,
    errorSamples: {},
    warmupErrors: 0,
    ttfc: [],
    total: [],
    scheduledAt: [],
    lag: [],
    marks: [],
    achievedRps: 0,
    maxInFlight: 0,
    validated: 0,
    cpu: { children: {}, bench: 0, benchEventLoop: 0, other: null, machine: null },
    monotonicUs: { start: 0, end: 0 },
    wallMs: 0,
  };
}

/** One request with the full body parsed: the pre-flight check of a target. */
export async function probe(target: StreamTarget, timeoutMs: number): Promise<{ status: number; body: string; ttfcMs: number; totalMs: number }> {
  return new Promise((resolve, reject) => {
    const body = target.body(requestTag(nextTag++));
    const start = performance.now();
    let first = 0;
    const req = httpRequest(
      { host: '127.0.0.1', port: target.port, method: 'POST', path: target.path, headers: { ...target.headers, 'content-length': String(body.byteLength) }, timeout: timeoutMs },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => {
          if (first === 0) first = performance.now();
          parts.push(part);
        });
        res.on('end', () => {
          const end = performance.now();
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8'), ttfcMs: first - start, totalMs: end - start });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${target.label}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
