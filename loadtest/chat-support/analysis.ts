/** From raw phase samples to the numbers the report shows: percentiles, verdicts, added latency. */
import type { CpuWindow } from '../support/cpu-meter.ts';
import type { PhaseRaw } from './open-loop.ts';
import type { UpstreamTiming } from './reply.ts';
import { percentile, round3, roundSummary, sortedCopy, splitHalfSpread, summarize, type Summary } from '../support/stats.ts';

/** A rate counts as sustained when all of these hold. */
export const SUSTAIN = {
  /** Failed requests at most this fraction of the measured ones. */
  maxErrorRate: 0.001,
  /** Completions per second in the measured window at least this fraction of the offered rate. */
  minAchievedRatio: 0.95,
  /** Median TTFC of the last fifth of the window at most this much above the first fifth's (ms): no backlog building up. */
  maxQueueGrowthMs: 20,
} as const;

/** Default TTFC p99 ceiling (ms) for a rate to count as sustained; BENCH_MAX_TTFC_P99_MS overrides it. */
export const DEFAULT_MAX_TTFC_P99_MS = 100;

/** The generator is suspect (it may not have offered the load on time) beyond these. */
export const GENERATOR = { maxEventLoopUtilization: 0.9, maxLagP99Ms: 10 } as const;

export interface PhaseSummary {
  target: string;
  rate: number;
  scheduled: number;
  ok: number;
  errorCount: number;
  errors: Record<string, number>;
  errorSamples: Record<string, string>;
  warmupErrors: number;
  achievedRps: number;
  ttfc: Summary;
  total: Summary;
  lag: Summary;
  /** Split-half spread of the p99s (ms): the noise floor of this run's p99. */
  p99Noise: { ttfc: number; total: number };
  queueGrowthMs: number;
  maxInFlight: number;
  validated: number;
  cpu: CpuWindow;
  sustained: boolean;
  /** Why not sustained, or why the generator is suspect. */
  verdict: string[];
  generatorLimited: boolean;
  monotonicUs: { start: number; end: number };
  /** The rest of the machine just before the phase (see waitForQuiet). */
  before: { otherPercent: number | null; waitedSec: number } | null;
  /** Where the time goes, from the upstream's own instants of the same requests. */
  legs: Legs | null;
}

/**
 * A request's time split at the upstream: `request` = client send to upstream has the request
 * body (via Troupe: Troupe's whole request handling and its upstream call); `firstRelay` =
 * upstream writes the first chunk to client has it; `lastRelay` = upstream ends the response to
 * client has the end. TTFC = request + upstream's own time to the first chunk + firstRelay.
 */
export interface Legs {
  joined: number;
  request: Summary;
  firstRelay: Summary;
  lastRelay: Summary;
}

function legsOf(raw: PhaseRaw, timings: ReadonlyMap<string, UpstreamTiming>): Legs | null {
  const request: number[] = [];
  const firstRelay: number[] = [];
  const lastRelay: number[] = [];
  for (const m of raw.marks) {
    const t = timings.get(m.tag);
    if (!t || t.first === 0 || t.last === 0) continue;
    request.push(t.arrived - m.sent);
    firstRelay.push(m.first - t.first);
    lastRelay.push(m.end - t.last);
  }
  if (request.length === 0) return null;
  return { joined: request.length, request: summarize(request), firstRelay: summarize(firstRelay), lastRelay: summarize(lastRelay) };
}

export function summarizePhase(
  raw: PhaseRaw,
  maxTtfcP99Ms: number,
  before: PhaseSummary['before'] = null,
  timings: ReadonlyMap<string, UpstreamTiming> | null = null,
): PhaseSummary {
  const ttfc = summarize(raw.ttfc);
  const total = summarize(raw.total);
  const lag = summarize(raw.lag);
  const queueGrowthMs = queueGrowth(raw);
  const verdict: string[] = [];
  const errorRate = raw.scheduled === 0 ? 1 : raw.errorCount / raw.scheduled;
  if (errorRate > SUSTAIN.maxErrorRate) verdict.push(`${(errorRate * 100).toFixed(2)}% errors`);
  if (raw.achievedRps < SUSTAIN.minAchievedRatio * raw.rate) verdict.push(`completed only ${raw.achievedRps.toFixed(0)} req/s`);
  if (queueGrowthMs > SUSTAIN.maxQueueGrowthMs) verdict.push(`backlog growing (TTFC p50 +${queueGrowthMs.toFixed(0)} ms over the window)`);
  if (!(ttfc.p99 <= maxTtfcP99Ms)) verdict.push(`TTFC p99 ${ttfc.p99.toFixed(0)} ms > ${maxTtfcP99Ms} ms`);
  const sustained = verdict.length === 0;
  const generatorLimited = raw.cpu.benchEventLoop > GENERATOR.maxEventLoopUtilization || lag.p99 > GENERATOR.maxLagP99Ms;
  if (generatorLimited) {
    verdict.push(`load generator late (event loop ${(raw.cpu.benchEventLoop * 100).toFixed(0)}% busy, schedule lag p99 ${lag.p99.toFixed(1)} ms)`);
  }
  return {
    target: raw.target,
    rate: raw.rate,
    scheduled: raw.scheduled,
    ok: raw.ok,
    errorCount: raw.errorCount,
    errors: raw.errors,
    errorSamples: raw.errorSamples,
    warmupErrors: raw.warmupErrors,
    achievedRps: raw.achievedRps,
    ttfc,
    total,
    lag,
    p99Noise: { ttfc: splitHalfSpread(raw.ttfc, 99), total: splitHalfSpread(raw.total, 99) },
    queueGrowthMs,
    maxInFlight: raw.maxInFlight,
    validated: raw.validated,
    cpu: raw.cpu,
    sustained,
    verdict,
    generatorLimited,
    monotonicUs: raw.monotonicUs,
    before,
    legs: timings ? legsOf(raw, timings) : null,
  };
}

/** Median TTFC of requests scheduled in the last fifth of the window minus that of the first fifth. */
function queueGrowth(raw: PhaseRaw): number {
  let windowMs = 0;
  for (const at of raw.scheduledAt) if (at > windowMs) windowMs = at;
  if (raw.ttfc.length < 10 || windowMs <= 0) return 0;
  const early: number[] = [];
  const late: number[] = [];
  raw.scheduledAt.forEach((at, i) => {
    const v = raw.ttfc[i];
    if (v === undefined) return;
    if (at <= windowMs / 5) early.push(v);
    else if (at >= (windowMs * 4) / 5) late.push(v);
  });
  if (early.length === 0 || late.length === 0) return 0;
  return percentile(sortedCopy(late), 50) - percentile(sortedCopy(early), 50);
}

export interface Added {
  p50: number;
  p99: number;
  /** Root-sum-square of both runs' split-half p99 spreads: a rough noise floor for `p99`. */
  p99Noise: number;
}

export interface RateResult {
  engine: string;
  rate: number;
  direct: PhaseSummary;
  troupe: PhaseSummary;
  /** Via Troupe minus direct, percentile by percentile (not per request). */
  added: { ttfc: Added; total: Added };
  sustained: boolean;
  /** Bytes Troupe wrote to stdout per measured request (its request log). */
  troupeLogBytesPerRequest: number | null;
}

export function compare(engine: string, direct: PhaseSummary, troupe: PhaseSummary, troupeLogBytes: number | null): RateResult {
  const added = (a: Summary, b: Summary, na: number, nb: number): Added => ({
    p50: b.p50 - a.p50,
    p99: b.p99 - a.p99,
    p99Noise: Math.hypot(na, nb),
  });
  return {
    engine,
    rate: troupe.rate,
    direct,
    troupe,
    added: {
      ttfc: added(direct.ttfc, troupe.ttfc, direct.p99Noise.ttfc, troupe.p99Noise.ttfc),
      total: added(direct.total, troupe.total, direct.p99Noise.total, troupe.p99Noise.total),
    },
    sustained: direct.sustained && troupe.sustained,
    troupeLogBytesPerRequest: troupeLogBytes === null || troupe.scheduled === 0 ? null : troupeLogBytes / troupe.scheduled,
  };
}

/** The JSON form: rounded to µs, NaN as null. */
export function phaseJson(p: PhaseSummary): Record<string, unknown> {
  return {
    ...p,
    achievedRps: round3(p.achievedRps),
    ttfc: roundSummary(p.ttfc),
    total: roundSummary(p.total),
    lag: roundSummary(p.lag),
    p99Noise: { ttfc: round3(p.p99Noise.ttfc), total: round3(p.p99Noise.total) },
    queueGrowthMs: round3(p.queueGrowthMs),
    cpu: roundCpu(p.cpu),
    legs: p.legs && {
      joined: p.legs.joined,
      request: roundSummary(p.legs.request),
      firstRelay: roundSummary(p.legs.firstRelay),
      lastRelay: roundSummary(p.legs.lastRelay),
    },
  };
}

function roundCpu(c: CpuWindow): Record<string, unknown> {
  const r = (v: number | null) => (v === null ? null : Math.round(v * 10) / 10);
  return {
    children: Object.fromEntries(Object.entries(c.children).map(([k, v]) => [k, r(v)])),
    bench: r(c.bench),
    benchEventLoop: round3(c.benchEventLoop),
    other: r(c.other),
    machine: r(c.machine),
  };
}

export function rateJson(r: RateResult): Record<string, unknown> {
  const a = (x: Added) => ({ p50: round3(x.p50), p99: round3(x.p99), p99Noise: round3(x.p99Noise) });
  return {
    engine: r.engine,
    rate: r.rate,
    sustained: r.sustained,
    added: { ttfc: a(r.added.ttfc), total: a(r.added.total) },
    troupeLogBytesPerRequest: r.troupeLogBytesPerRequest === null ? null : Math.round(r.troupeLogBytesPerRequest),
    direct: phaseJson(r.direct),
    troupe: phaseJson(r.troupe),
  };
}
