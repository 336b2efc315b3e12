/** Summaries and markdown tables of the conversations benchmark. */
import type { TargetRun as RateRaw } from '../support/load.ts';
import type { CpuWindow } from '../support/proc.ts';
import { markdownTable, round3, roundSummary, splitHalfSpread, summarize } from '../support/report.ts';
import type { FanoutResult } from './fanout.ts';
import type { IdleResult } from './idle.ts';

export type PathSummary = ReturnType<typeof summarizePath>;
export type RateResult = ReturnType<typeof compareRate>;
export type GcWindow = ReturnType<typeof gcInWindow>;

/** GC pauses [start µs, ms, kind] that started inside the window (µs, CLOCK_MONOTONIC). */
export function gcInWindow(events: readonly [number, number, number][], window: { start: number; end: number }) {
  const inside = events.filter(([at]) => at >= window.start && at <= window.end);
  const totalMs = round3(inside.reduce((sum, [, ms]) => sum + ms, 0)) ?? 0;
  return { count: inside.length, totalMs, maxMs: round3(Math.max(0, ...inside.map(([, ms]) => ms))) ?? 0, longPauses: inside.filter(([, ms]) => ms >= 5).length, major: inside.filter(([, , kind]) => kind === 4).length };
}

export const SUSTAIN = { minAchievedRatio: 0.95, maxErrorRate: 0.001 } as const;
export const GENERATOR_MAX_LAG_P99_MS = 5;

export function summarizePath(raw: RateRaw) {
  const errorCount = Object.values(raw.errors).reduce((a, b) => a + b, 0);
  return {
    target: raw.label, scheduled: raw.scheduled, ok: raw.ok, errorCount, errors: raw.errors, errorSamples: raw.errorSamples, achievedRps: raw.achievedRps,
    latency: summarize(raw.total), p99Noise: splitHalfSpread(raw.total, 99), lag: summarize(raw.lag), maxInFlight: raw.maxInFlight,
    // The slowest requests and when they were scheduled (s into the window): stalls or steady queueing.
    slowest: raw.total
      .map((ms, i) => ({ ms, atSec: (raw.scheduledAt[i] ?? Number.NaN) / 1000 }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 10)
      .map((x) => ({ ms: round3(x.ms) ?? Number.NaN, atSec: round3(x.atSec) ?? Number.NaN })),
  };
}

export function compareRate(engine: string, direct: RateRaw, perform: RateRaw, maxP99Ms: number) {
  const d = summarizePath(direct);
  const p = summarizePath(perform);
  const verdict: string[] = [];
  for (const s of [d, p]) {
    if (s.achievedRps < SUSTAIN.minAchievedRatio * direct.rate) verdict.push(`${s.target} achieved ${s.achievedRps.toFixed(0)} req/s`);
    if (s.scheduled > 0 && s.errorCount / s.scheduled > SUSTAIN.maxErrorRate) verdict.push(`${s.target} ${s.errorCount} errors`);
    if (!(s.latency.p99 <= maxP99Ms)) verdict.push(`${s.target} p99 ${s.latency.p99.toFixed(1)} ms > ${maxP99Ms} ms`);
  }
  return {
    engine, rate: direct.rate, direct: d, perform: p, sustained: verdict.length === 0, verdict,
    added: { p50: p.latency.p50 - d.latency.p50, p99: p.latency.p99 - d.latency.p99, p99Noise: Math.max(d.p99Noise, p.p99Noise) },
    generatorSuspect: Math.max(d.lag.p99, p.lag.p99) > GENERATOR_MAX_LAG_P99_MS || (direct.cpu?.benchEventLoop ?? 0) > 0.9,
    cpu: direct.cpu ?? { children: {}, bench: 0, benchEventLoop: 0, other: null, machine: null },
    monotonicUs: direct.monotonicUs,
    /** Troupe's GC pauses inside the measured window (filled in after the ladder). */
    gc: null as GcWindow | null,
  };
}

const ms = (v: number, digits = 2): string => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');
const signed = (v: number): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(2)}` : 'n/a');
const pct = (v: number | null | undefined): string => (v === null || v === undefined ? '?' : v.toFixed(0));
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const kib = (bytes: number | null | undefined): string => (bytes === null || bytes === undefined || !Number.isFinite(bytes) ? 'n/a' : (bytes / 1024).toFixed(2));

export function idleTable(rows: readonly { engine: string; result: IdleResult }[], goalBytes: number): string {
  return markdownTable(
    ['engine', 'sockets open / requested', 'conversations', 'Troupe RSS before → half → after (MiB)', 'RSS per socket (KiB)', `≤ ${goalBytes / 1024} KiB`, 'RSS per socket, 2nd half (KiB)', 'V8 heap used per socket (KiB)', 'V8 heap used per socket, 2nd half (KiB)', 'client RSS per socket (KiB, procs)', 'connect time (s)', 'failures', 'liveness'],
    rows.map(({ engine, result: r }) => [
      engine,
      `${r.openAtSample} / ${r.plan.requested}${r.plan.target < r.plan.requested ? ' (capped)' : ''}`, String(r.plan.conversations), `${mib(r.troupeBefore.rss)} → ${r.troupeHalf ? mib(r.troupeHalf.rss) : '?'} → ${mib(r.troupeAfter.rss)}`,
      kib(r.perSocket?.rssBytes), r.perSocket ? (r.perSocket.rssBytes <= goalBytes ? 'yes' : 'no') : 'n/a', kib(r.marginalPerSocket?.rssBytes),
      kib(r.perSocket?.heapUsedBytes), kib(r.marginalPerSocket?.heapUsedBytes), `${kib(r.clientPerSocketRssBytes)} (${r.clientProcesses})`,
      r.connectSec.toFixed(1), r.failed === 0 && r.unexpectedCloses === 0 ? '0' : `${r.failed} failed, ${r.unexpectedCloses} closed (${Object.entries(r.errors).map(([k, v]) => `${k}:${v}`).join(' ')})`, r.liveness ? `${r.liveness.received}/${r.liveness.expected} got a reply` : 'not checked',
    ]),
    'lrrrrlrrrrrrl',
  );
}

/** CPU % of every watched Troupe process together (one, or A and B across processes). */
function troupeCpu(cpu: CpuWindow): number | null {
  const shares = Object.entries(cpu.children).filter(([name]) => name.startsWith('troupe')).map(([, share]) => share);
  if (shares.length === 0 || shares.some((share) => share === null)) return null;
  return shares.reduce<number>((sum, share) => sum + (share ?? 0), 0);
}

export function fanoutTable(rows: readonly { engine: string; result: FanoutResult }[]): string {
  return markdownTable(
    ['engine', 'subscribers', 'chunks (msgs × chunks)', 'spread p50', 'spread p99', 'latency p50', 'latency p99', 'first-sub. latency p50 / p99', 'last-sub. latency p50 / p99', 'POST message p50 / p99', 'missing', 'CPU % troupe (all) / upstream / bench'],
    rows.map(({ engine, result: r }) => [
      engine,
      String(r.subscribers),
      `${r.completeChunks} (${r.messages} × ${r.chunksPerMessage})`, ms(r.spreadMs.p50, 3), ms(r.spreadMs.p99, 3),
      ms(r.latencyMs.p50, 3), ms(r.latencyMs.p99, 3), `${ms(r.firstSubscriberLatencyMs.p50, 3)} / ${ms(r.firstSubscriberLatencyMs.p99, 3)}`,
      `${ms(r.lastSubscriberLatencyMs.p50, 3)} / ${ms(r.lastSubscriberLatencyMs.p99, 3)}`, `${ms(r.httpMessageMs.p50, 1)} / ${ms(r.httpMessageMs.p99, 1)}`, `${r.missingDeliveries} of ${r.expectedDeliveries}`,
      `${pct(troupeCpu(r.cpu))} / ${pct(r.cpu.children.upstream)} / ${pct(r.cpu.bench)}`,
    ]),
    'lrrrrrrrrrrr',
  );
}

function errorsCell(s: PathSummary): string {
  if (s.errorCount === 0) return '0';
  return `${s.errorCount} (${Object.entries(s.errors).map(([k, v]) => `${k}:${v}`).join(' ')})`;
}

export function performTable(results: readonly RateResult[], goalMs: number): string {
  return markdownTable(
    ['engine', 'offered req/s', 'achieved direct / perform', 'direct p50', 'direct p99', 'perform p50', 'perform p99', 'added p50', 'added p99 (±noise)', `added p99 ≤ ${goalMs} ms`, 'errors direct / perform', 'gen. lag p99', 'CPU % troupe / upstream / bench / other', 'Troupe CPU per perform (ms)', 'Troupe GC: total ms / longest pause ms', 'sustained'],
    results.map((r) => [
      r.engine,
      String(r.rate), `${r.direct.achievedRps.toFixed(0)} / ${r.perform.achievedRps.toFixed(0)}`, ms(r.direct.latency.p50),
      ms(r.direct.latency.p99), ms(r.perform.latency.p50), ms(r.perform.latency.p99),
      signed(r.added.p50), `${signed(r.added.p99)} (±${ms(r.added.p99Noise)})`, Number.isFinite(r.added.p99) ? (r.added.p99 <= goalMs ? 'yes' : 'no') : 'n/a',
      `${errorsCell(r.direct)} / ${errorsCell(r.perform)}`, `${ms(Math.max(r.direct.lag.p99, r.perform.lag.p99))}${r.generatorSuspect ? ' ⚠' : ''}`, `${pct(r.cpu.children.troupe)} / ${pct(r.cpu.children.upstream)} / ${pct(r.cpu.bench)} / ${pct(r.cpu.other)}`,
      troupeCpuPerRequest(r), r.gc ? `${r.gc.totalMs.toFixed(0)} / ${r.gc.maxMs.toFixed(1)}` : 'n/a', r.sustained ? 'yes' : `no: ${r.verdict.join('; ')}`,
    ]),
    'lrrrrrrrrlrrrrrl',
  );
}

/** Troupe's CPU time per perform (it serves only those in the window), ms. */
function troupeCpuPerRequest(r: RateResult): string {
  const share = r.cpu.children.troupe;
  if (share === null || share === undefined || r.perform.achievedRps <= 0) return 'n/a';
  return ((share / 100 / r.perform.achievedRps) * 1000).toFixed(2);
}

export function rateJson(r: RateResult): Record<string, unknown> {
  const path = (s: PathSummary) => ({ ...s, latency: roundSummary(s.latency), lag: roundSummary(s.lag), p99Noise: round3(s.p99Noise), achievedRps: round3(s.achievedRps) });
  const { engine, rate, sustained, verdict, generatorSuspect, cpu, gc } = r;
  return { engine, rate, direct: path(r.direct), perform: path(r.perform), added: { p50: round3(r.added.p50), p99: round3(r.added.p99), p99Noise: round3(r.added.p99Noise) }, sustained, verdict, generatorSuspect, cpu, gc };
}

export function fanoutJson(r: FanoutResult): Record<string, unknown> {
  const { spreadMs, latencyMs, firstSubscriberLatencyMs: first, lastSubscriberLatencyMs: last, httpMessageMs } = r;
  return { ...r, spreadMs: roundSummary(spreadMs), latencyMs: roundSummary(latencyMs), firstSubscriberLatencyMs: roundSummary(first), lastSubscriberLatencyMs: roundSummary(last), httpMessageMs: roundSummary(httpMessageMs) };
}
