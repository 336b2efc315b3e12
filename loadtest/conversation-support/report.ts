/** Summaries, JSON and Markdown of the conversations benchmark. */
import type { TargetRun } from '../support/load.ts';
import { NO_CPU, type CpuWindow } from '../support/proc.ts';
import { formatSrcProfile, type SrcProfile } from '../support/profile.ts';
import { markdownTable, round3, roundSummary, splitHalfSpread, summarize } from '../support/report.ts';
import type { CrossResult, FanoutResult } from './fanout.ts';
import type { IdleResult, MemorySample } from './idle.ts';
import type { Config } from '../conversations.ts';

export type PathSummary = ReturnType<typeof summarizePath>;
export type RateResult = ReturnType<typeof compareRate>;

/** GC pauses [start µs, ms, kind] that started inside the window (µs, CLOCK_MONOTONIC). */
export function gcInWindow(events: readonly [number, number, number][], window: { start: number; end: number }) {
  const inside = events.filter(([at]) => at >= window.start && at <= window.end);
  const totalMs = round3(inside.reduce((sum, [, ms]) => sum + ms, 0)) ?? 0;
  const maxMs = round3(Math.max(0, ...inside.map(([, ms]) => ms))) ?? 0;
  const longPauses = inside.filter(([, ms]) => ms >= 5).length;
  return { count: inside.length, totalMs, maxMs, longPauses, major: inside.filter(([, , kind]) => kind === 4).length };
}

const SUSTAIN = { minAchievedRatio: 0.95, maxErrorRate: 0.001 } as const;
const GENERATOR_MAX_LAG_P99_MS = 5;

export function summarizePath(raw: TargetRun) {
  const errorCount = Object.values(raw.errors).reduce((a, b) => a + b, 0);
  return {
    target: raw.label, scheduled: raw.scheduled, ok: raw.ok, errorCount, errors: raw.errors, errorSamples: raw.errorSamples,
    achievedRps: raw.achievedRps,
    latency: summarize(raw.total), p99Noise: splitHalfSpread(raw.total, 99), lag: summarize(raw.lag), maxInFlight: raw.maxInFlight,
    // The slowest requests and when they were scheduled (s into the window): stalls or steady queueing.
    slowest: raw.total
      .map((ms, i) => ({ ms, atSec: (raw.scheduledAt[i] ?? Number.NaN) / 1000 }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 10)
      .map((x) => ({ ms: round3(x.ms) ?? Number.NaN, atSec: round3(x.atSec) ?? Number.NaN })),
  };
}

export function compareRate(engine: string, direct: TargetRun, perform: TargetRun, maxP99Ms: number) {
  const [d, p] = [summarizePath(direct), summarizePath(perform)];
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
    cpu: direct.cpu ?? NO_CPU,
    monotonicUs: direct.monotonicUs,
    /** Troupe's GC pauses inside the measured window (filled in after the ladder). */
    gc: null as ReturnType<typeof gcInWindow> | null,
  };
}

export interface EngineRun {
  engine: string;
  nodeBinary: string;
  fanout: FanoutResult | null;
  fanoutCross: CrossResult | null;
  perform: RateResult[];
  performPreflight: { directMs: number; performMs: number; upstreamRequestBytes: number } | null;
  /** Troupe's memory (after a full GC) before and after the perform rates: retention shows here. */
  performMemory: { before: MemorySample; after: MemorySample } | null;
  idle: IdleResult | null;
  profile: SrcProfile | null;
  troupeExits: Record<string, string>;
  errors: string[];
}

const ms = (v: number, digits = 2): string => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');
const signed = (v: number): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(2)}` : 'n/a');
const pct = (v: number | null | undefined): string => (v === null || v === undefined ? '?' : v.toFixed(0));
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const kib = (bytes: number | null | undefined): string =>
  bytes === null || bytes === undefined || !Number.isFinite(bytes) ? 'n/a' : (bytes / 1024).toFixed(2);
const pair = (a: string, b: string) => `${a} / ${b}`;
const errorList = (errors: Record<string, number>) => Object.entries(errors).map(([k, v]) => `${k}:${v}`).join(' ');

function idleTable(rows: readonly { engine: string; result: IdleResult }[], goalBytes: number): string {
  return markdownTable(
    ['engine', 'sockets open / requested', 'conversations', 'Troupe RSS before → half → after (MiB)', 'RSS per socket (KiB)',
      `≤ ${goalBytes / 1024} KiB`,
      'RSS per socket, 2nd half (KiB)', 'V8 heap used per socket (KiB)', 'V8 heap used per socket, 2nd half (KiB)',
      'client RSS per socket (KiB, procs)',
      'connect time (s)', 'failures', 'liveness'],
    rows.map(({ engine, result: r }) => [
      engine,
      `${r.openAtSample} / ${r.plan.requested}${r.plan.target < r.plan.requested ? ' (capped)' : ''}`, String(r.plan.conversations),
      `${mib(r.troupeBefore.rss)} → ${r.troupeHalf ? mib(r.troupeHalf.rss) : '?'} → ${mib(r.troupeAfter.rss)}`,
      kib(r.perSocket?.rssBytes), r.perSocket ? (r.perSocket.rssBytes <= goalBytes ? 'yes' : 'no') : 'n/a',
      kib(r.marginalPerSocket?.rssBytes),
      kib(r.perSocket?.heapUsedBytes), kib(r.marginalPerSocket?.heapUsedBytes), `${kib(r.clientPerSocketRssBytes)} (${r.clientProcesses})`,
      r.connectSec.toFixed(1),
      r.failed === 0 && r.unexpectedCloses === 0 ? '0' : `${r.failed} failed, ${r.unexpectedCloses} closed (${errorList(r.errors)})`,
      r.liveness ? `${r.liveness.received}/${r.liveness.expected} got a reply` : 'not checked',
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

function fanoutTable(rows: readonly { engine: string; result: FanoutResult }[]): string {
  const p50p99 = (s: { p50: number; p99: number }, digits = 3) => pair(ms(s.p50, digits), ms(s.p99, digits));
  return markdownTable(
    ['engine', 'subscribers', 'chunks (msgs × chunks)', 'spread p50', 'spread p99', 'latency p50', 'latency p99',
      'first-sub. latency p50 / p99',
      'last-sub. latency p50 / p99', 'POST message p50 / p99', 'missing', 'CPU % troupe (all) / upstream / bench'],
    rows.map(({ engine, result: r }) => [
      engine, String(r.subscribers), `${r.completeChunks} (${r.messages} × ${r.chunksPerMessage})`, ms(r.spreadMs.p50, 3),
      ms(r.spreadMs.p99, 3),
      ms(r.latencyMs.p50, 3), ms(r.latencyMs.p99, 3), p50p99(r.firstSubscriberLatencyMs), p50p99(r.lastSubscriberLatencyMs),
      p50p99(r.httpMessageMs, 1),
      `${r.missingDeliveries} of ${r.expectedDeliveries}`,
      `${pct(troupeCpu(r.cpu))} / ${pct(r.cpu.children.upstream)} / ${pct(r.cpu.bench)}`,
    ]),
    'lrrrrrrrrrrr',
  );
}

const errorsCell = (s: PathSummary): string => (s.errorCount === 0 ? '0' : `${s.errorCount} (${errorList(s.errors)})`);

/** Troupe's CPU time per perform (it serves only those in the window), ms. */
function troupeCpuPerRequest(r: RateResult): string {
  const share = r.cpu.children.troupe;
  if (share === null || share === undefined || r.perform.achievedRps <= 0) return 'n/a';
  return ((share / 100 / r.perform.achievedRps) * 1000).toFixed(2);
}

function performTable(results: readonly RateResult[], goalMs: number): string {
  return markdownTable(
    ['engine', 'offered req/s', 'achieved direct / perform', 'direct p50', 'direct p99', 'perform p50', 'perform p99', 'added p50',
      'added p99 (±noise)',
      `added p99 ≤ ${goalMs} ms`, 'errors direct / perform', 'gen. lag p99', 'CPU % troupe / upstream / bench / other',
      'Troupe CPU per perform (ms)',
      'Troupe GC: total ms / longest pause ms', 'sustained'],
    results.map((r) => [
      r.engine, String(r.rate), pair(r.direct.achievedRps.toFixed(0), r.perform.achievedRps.toFixed(0)), ms(r.direct.latency.p50),
      ms(r.direct.latency.p99), ms(r.perform.latency.p50), ms(r.perform.latency.p99),
      signed(r.added.p50), `${signed(r.added.p99)} (±${ms(r.added.p99Noise)})`,
      Number.isFinite(r.added.p99) ? (r.added.p99 <= goalMs ? 'yes' : 'no') : 'n/a',
      pair(errorsCell(r.direct), errorsCell(r.perform)),
      `${ms(Math.max(r.direct.lag.p99, r.perform.lag.p99))}${r.generatorSuspect ? ' ⚠' : ''}`,
      `${pct(r.cpu.children.troupe)} / ${pct(r.cpu.children.upstream)} / ${pct(r.cpu.bench)} / ${pct(r.cpu.other)}`,
      troupeCpuPerRequest(r), r.gc ? pair(r.gc.totalMs.toFixed(0), r.gc.maxMs.toFixed(1)) : 'n/a',
      r.sustained ? 'yes' : `no: ${r.verdict.join('; ')}`,
    ]),
    'lrrrrrrrrlrrrrrl',
  );
}

function rateJson(r: RateResult): Record<string, unknown> {
  const path = (s: PathSummary) => ({ ...s, latency: roundSummary(s.latency), lag: roundSummary(s.lag), p99Noise: round3(s.p99Noise),
    achievedRps: round3(s.achievedRps) });
  const { engine, rate, sustained, verdict, generatorSuspect, cpu, gc } = r;
  const added = { p50: round3(r.added.p50), p99: round3(r.added.p99), p99Noise: round3(r.added.p99Noise) };
  return { engine, rate, direct: path(r.direct), perform: path(r.perform), added, sustained, verdict, generatorSuspect, cpu, gc };
}

function fanoutJson(r: FanoutResult): Record<string, unknown> {
  const { spreadMs, latencyMs, firstSubscriberLatencyMs: first, lastSubscriberLatencyMs: last, httpMessageMs } = r;
  const rounded = { spreadMs: roundSummary(spreadMs), latencyMs: roundSummary(latencyMs), firstSubscriberLatencyMs: roundSummary(first) };
  return { ...r, ...rounded, lastSubscriberLatencyMs: roundSummary(last), httpMessageMs: roundSummary(httpMessageMs) };
}

export const engineJson = ({ fanout, fanoutCross, perform, ...r }: EngineRun) => ({
  ...r, fanout: fanout ? fanoutJson(fanout) : null,
  fanoutCrossProcess: fanoutCross ? { ...fanoutCross, fanout: fanoutJson(fanoutCross.fanout) } : null,
  perform: perform.map(rateJson),
});


export function conversationsMarkdown(cfg: Config, runs: readonly EngineRun[], head: string, tail: string[]): string {
  const out: string[] = ['', `## Conversations benchmark (${new Date().toISOString()})`, '', head, ''];
  const idleRows = runs.flatMap((r) => (r.idle ? [{ engine: r.engine, result: r.idle }] : []));
  const shared = idleRows[0]?.result.plan.conversations ?? cfg.conversations;
  if (idleRows.length > 0) {
    out.push(
      `### (a) Idle conversation WebSockets on one Troupe process`,
      '',
      [
        `Troupe LOG_LEVEL=${cfg.socketsLogLevel} for this part; VmRSS and V8 heap sampled after a full GC (--expose-gc, via the heap`,
        'probe), from 3 s after connecting every 2 s until RSS and the V8 heap size hold steady (within 2 MiB twice in a row): before,',
        'with half the sockets and with all; per socket = (after - before) / sockets open; "2nd half" = (after - half) / sockets added in',
        'the second half, which leaves out one-time growth the first sockets trigger (V8 new space, allocator arenas). 1 KiB = 1024 bytes.',
        `The sockets share ${shared} conversations (socket i joins conversation i mod ${shared}); their client side lives in socket-holder`,
        'processes (ws client), counted apart.',
      ].join(' '),
      '',
      idleTable(idleRows, cfg.socketGoalBytes),
      '',
      ...idleRows.flatMap(({ engine, result: { plan, errorSamples } }) => [
        ...(plan.capReason ? [`${engine}: ${plan.requested} sockets requested, ${plan.target} opened at most: ${plan.capReason}.`] : []),
        ...Object.entries(errorSamples).map(([kind, sample]) => `${engine}: failure ${kind}: ${sample}`),
      ]),
      '',
    );
  }
  const fanRows = runs.flatMap((r) => [
    ...(r.fanout ? [{ engine: `${r.engine}, one process`, result: r.fanout }] : []),
    ...(r.fanoutCross ? [{ engine: `${r.engine}, A → Redis → B`, result: r.fanoutCross.fanout }] : []),
  ]);
  if (fanRows.length > 0) {
    out.push(
      `### (b) Chunk fan-out to ${cfg.fanoutSubscribers} subscribers of one conversation`,
      '',
      [
        `${cfg.fanoutMessages} messages (after ${cfg.fanoutWarmup} warm-up) posted over HTTP; the upstream streams ${cfg.fanoutChunks}`,
        `chunks ${cfg.fanoutGapMs} ms apart, each stamped with the CLOCK_MONOTONIC µs it was written. Spread = last - first subscriber`,
        'arrival per chunk; latency = arrival - upstream write, per chunk and subscriber. All subscribers live in the benchmark process',
        '(one thread), so the spread includes its own time to take in the messages. "A → Redis → B": two Troupe processes on one fresh',
        'PostgreSQL database and one Redis; the actor runs on A, where the messages are posted, the subscribers are connected to B, so',
        'every chunk crosses Redis pub/sub; CPU is A + B. Times in ms.',
      ].join(' '),
      '',
      fanoutTable(fanRows),
      '',
      ...fanRows.flatMap(({ engine, result }) => result.problems.map((p) => `${engine}: ${p}`)),
      ...runs.flatMap((r) => {
        const p = r.fanoutCross?.placement;
        if (!p) return [];
        const where = p.onA === null ? 'not verified (no processId in the logs or in Redis)' : p.onA ? 'on A, as intended' : 'NOT on A';
        const processes = `${p.actorProcessId ?? '?'} (A ${p.aProcessId ?? '?'}, B ${p.bProcessId ?? '?'})`;
        return [`${r.engine} across processes: Redis' room cache puts the actor on ${processes}: ${where}.`];
      }),
      '',
    );
  }
  const rateRows = runs.flatMap((r) => r.perform);
  if (rateRows.length > 0) {
    const gaps = cfg.performGapMs > 0 ? ` ${cfg.performGapMs} ms apart` : ' written in one burst';
    out.push(
      `### (c) POST /perform vs the upstream alone`,
      '',
      [
        `Open loop, ${cfg.performDurationSec} s measured after ${cfg.performWarmupSec} s warm-up per rate; requests alternate between the`,
        'paths (each path at the offered rate). direct = the same client streaming POST /v1/chat/completions from the upstream with the',
        'exact body Troupe sends for that perform; perform = POST /perform (Troupe streams the same reply from the upstream, then answers',
        `JSON). The reply is ${cfg.performTokens} chunks${gaps}. Latency = request sent to last response byte, ms. Troupe`,
        `LOG_LEVEL=${cfg.logLevel}${cfg.cpuProf ? '; Troupe ran under --cpu-prof (slower)' : ''}.`,
      ].join(' '),
      '',
      performTable(rateRows, cfg.performGoalMs),
      '',
    );
    for (const r of runs) {
      const sustained = r.perform.filter((x) => x.sustained);
      const best = sustained.at(-1);
      if (!best) continue;
      const worst = Math.max(...sustained.map((x) => x.added.p99));
      const verdict = `${worst <= cfg.performGoalMs ? 'meets' : 'MISSES'} the ≤ ${cfg.performGoalMs} ms goal`;
      out.push(
        `${r.engine}: perform sustained up to ${best.rate} req/s offered (${best.perform.achievedRps.toFixed(0)} achieved) ` +
          'of the rates tried; ' +
          `added p99 ${worst.toFixed(2)} ms at worst over the sustained rates: ${verdict}.`,
      );
    }
    for (const { engine, performMemory: m } of runs) {
      if (!m) continue;
      out.push(
        `${engine}: Troupe after a full GC: heap used ${mib(m.before.heapUsed)} MiB before the perform rates, ` +
          `${mib(m.after.heapUsed)} MiB after; ` +
          `RSS ${mib(m.before.rss)} → ${mib(m.after.rss)} MiB (peak ${mib(m.after.peakRss)} MiB).`,
      );
    }
    out.push('');
  }
  out.push(...tail);
  for (const r of runs) if (r.profile) out.push('', formatSrcProfile(r.profile, `${r.engine}, perform windows`));
  return out.join('\n');
}
