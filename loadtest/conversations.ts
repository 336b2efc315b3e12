/**
 * `npm run bench:conversations`, per HTTP engine (node; uws when a Node here can load uWebSockets.js):
 *   (a) sockets: N idle conversation WebSockets on one Troupe (clients in socket-holder processes): its memory per socket.
 *   (b) fanout: stamped upstream chunks fanned out to the subscribers of one conversation: spread and latency per chunk.
 *   (b') fanout-redis: the same with the actor on Troupe A and the subscribers on B (PostgreSQL + Redis).
 *   (c) perform: open-loop POST /perform interleaved with Troupe's own upstream request replayed: Troupe's added latency.
 * Writes loadtest/results/conversations-<stamp>.{json,md}. Its BENCH_* settings: docs/benchmarks.md, Conversations: settings. */
import { totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { WebSocket } from 'ws';
import { delay, gitState, machine, runBench, type Launched, type Log } from './support/children.ts';
import { envDatabaseUrl, envFlag, envList, envLogLevel, envNumber as num, envRates, envText } from './support/env.ts';
import { performTargets, runLoad, type TargetRun } from './support/load.ts';
import * as proc from './support/proc.ts';
import { fixed, markdownTable, round3, splitHalfSpread, summarize, writeResults } from './support/report.ts';
import { openReadySocket, wsUrl } from './support/sockets.ts';
import * as api from './support/troupe.ts';
import { BENCH_MODEL, expectedPerformBody, parseStamps, STAMP_PREFIX, startUpstream } from './support/upstream.ts';
import { MIB, probeTroupe, runIdle, sum, type Holder, type MemorySample } from './conversation-support/idle.ts';

const PARTS = ['sockets', 'fanout', 'fanout-redis', 'perform'] as const;
const [FANOUT_PAUSE_MS, FANOUT_TIMEOUT_MS] = [50, 15_000];
const PLAYER_LINE = 'Halt! Who goes there, and what business do you have at the east gate after dark?';
const SUSTAIN = { minAchievedRatio: 0.95, maxErrorRate: 0.001, maxGeneratorLagP99Ms: 5 } as const;
const sources = (envText('BENCH_SOURCE_ADDRESSES') ?? '127.0.0.1').split(',').map((s) => s.trim()).filter(Boolean);
if (!sources.length || sources.some((s) => !/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(s))) {
  throw new Error(`BENCH_SOURCE_ADDRESSES must be loopback IPv4 addresses (127.x.y.z), got '${sources.join(',')}'`);
}
const cfg = {
  engines: envList('BENCH_ENGINES', ['node', 'uws'] as const), parts: envList('BENCH_PARTS', PARTS),
  sockets: num('BENCH_SOCKETS', 10_000, 1), conversations: num('BENCH_CONVERSATIONS', 100, 1), sourceAddresses: [...new Set(sources)],
  socketsPerClient: num('BENCH_SOCKETS_PER_CLIENT', 15_000, 100), connectConcurrency: num('BENCH_CONNECT_CONCURRENCY', 200, 1),
  socketsLogLevel: envLogLevel('BENCH_SOCKETS_LOG_LEVEL', 'warn'), socketGoalBytes: num('BENCH_SOCKET_GOAL_BYTES', 4096, 1),
  fanoutSubscribers: num('BENCH_FANOUT_SUBSCRIBERS', 10, 1), fanoutMessages: num('BENCH_FANOUT_MESSAGES', 25, 1),
  fanoutWarmup: num('BENCH_FANOUT_WARMUP', 3, 0), fanoutChunks: num('BENCH_FANOUT_CHUNKS', 40, 1),
  fanoutGapMs: num('BENCH_FANOUT_GAP_MS', 5, 0), performRates: envRates('BENCH_PERFORM_RATES', '50,100,200,400'),
  performDurationSec: num('BENCH_PERFORM_DURATION', 10, 1, false), performWarmupSec: num('BENCH_PERFORM_WARMUP', 2, 0, false),
  performTokens: num('BENCH_PERFORM_TOKENS', 40, 1), performGapMs: num('BENCH_PERFORM_GAP_MS', 0, 0),
  performGoalMs: num('BENCH_PERFORM_GOAL_MS', 2, 0, false), maxP99Ms: num('BENCH_MAX_P99_MS', 100, 1, false),
  keepGoing: envFlag('BENCH_KEEP_GOING'), logLevel: envLogLevel('BENCH_LOG_LEVEL', 'info'), maxRunSec: num('BENCH_MAX_RUN_SEC', 3600, 60),
  quietWaitSec: num('BENCH_QUIET_WAIT', 10, 0), quietPercent: num('BENCH_QUIET_PERCENT', 60, 1), databaseUrl: envDatabaseUrl(),
  redisUrl: envText('BENCH_REDIS_URL') ?? 'redis://127.0.0.1:6379',
};
const mib = (bytes: number) => (bytes / MIB).toFixed(1);
/** Waits (at most BENCH_QUIET_WAIT s) for the rest of the machine to calm down before a measured phase. */
const quiet = (watch: readonly proc.WatchedProcess[]) =>
  cfg.quietWaitSec > 0 && proc.waitForQuiet(cfg.quietWaitSec, cfg.quietPercent, watch);
/** Posts on `troupe`, takes in the chunks on subscriber sockets of `via` (all on this thread: the spread is an upper bound
 * of Troupe's). Spread = last minus first arrival per chunk; latency = arrival minus the upstream's stamp. */
async function runFanout(troupe: api.Troupe, via: api.Troupe, conversationId: string, watch: readonly proc.WatchedProcess[], log: Log) {
  const n = cfg.fanoutSubscribers;
  const inbox: { at: number; data: Buffer }[][] = Array.from({ length: n }, () => []);
  const sockets: WebSocket[] = [];
  const [spread, latency, firstLatency, lastLatency, httpMs]: [number[], number[], number[], number[], number[]] = [[], [], [], [], []];
  let [completeChunks, missing, stopCpu] = [0, 0, null as (() => proc.CpuWindow) | null];
  await quiet(watch);
  try {
    for (const [i, box] of inbox.entries()) {
      const onMessage = (data: Buffer, at: number) => void box.push({ at, data });
      sockets.push(await openReadySocket(wsUrl(via.base, conversationId, via.key), { timeoutMs: FANOUT_TIMEOUT_MS, onMessage })
        .catch((err: Error & { kind?: string }) => Promise.reject(new Error(`subscriber ${i}: ${err.kind}: ${err.message}`))));
    }
    for (let m = 0; m < cfg.fanoutWarmup + cfg.fanoutMessages; m++) {
      const measured = m >= cfg.fanoutWarmup;
      if (measured) stopCpu ??= proc.startCpuWindow(watch);
      for (const box of inbox) box.length = 0;
      const t0 = performance.now();
      await api.postMessage(troupe, conversationId, `${STAMP_PREFIX} message ${m}`);
      if (measured) httpMs.push(performance.now() - t0);
      // `done` goes out before the HTTP reply, but may not have arrived here yet.
      const deadline = Date.now() + FANOUT_TIMEOUT_MS;
      while (!inbox.every((box) => box.some((a) => a.data.includes('"done":true'))) && Date.now() < deadline) await delay(2);
      if (!measured) continue;
      // Every stamped chunk that arrived: its index, the upstream's write time (micros) and the arrival (at).
      const arrivals = inbox.flat().flatMap(({ at, data }) => {
        const event = JSON.parse(data.toString('utf8')) as { type?: string; content?: string };
        return event.type === 'chunk' ? parseStamps(event.content ?? '').map((stamp) => ({ ...stamp, at })) : [];
      });
      latency.push(...arrivals.map((a) => (a.at - a.micros) / 1000));
      const byChunk = Map.groupBy(arrivals, (a) => a.index);
      for (let c = 0; c < cfg.fanoutChunks; c++) {
        const [at, written] = [byChunk.get(c)?.map((a) => a.at) ?? [], byChunk.get(c)?.[0]?.micros ?? 0];
        missing += Math.max(0, n - at.length);
        if (at.length < n) continue;
        completeChunks++;
        const [first, last] = [Math.min(...at), Math.max(...at)];
        spread.push((last - first) / 1000);
        firstLatency.push((first - written) / 1000);
        lastLatency.push((last - written) / 1000);
      }
      await delay(FANOUT_PAUSE_MS);
    }
  } finally {
    for (const ws of sockets) ws.terminate();
  }
  log(`fan-out: ${completeChunks} chunks x ${n} subscribers, ${missing} missing`);
  return {
    subscribers: n, messages: cfg.fanoutMessages, chunksPerMessage: cfg.fanoutChunks, gapMs: cfg.fanoutGapMs, completeChunks,
    expectedDeliveries: cfg.fanoutMessages * cfg.fanoutChunks * n, missingDeliveries: missing, spreadMs: summarize(spread),
    latencyMs: summarize(latency), firstSubscriberLatencyMs: summarize(firstLatency), lastSubscriberLatencyMs: summarize(lastLatency),
    httpMessageMs: summarize(httpMs), cpu: stopCpu?.() ?? proc.NO_CPU,
  };
}
/** Two Troupe processes on one fresh PostgreSQL database and one Redis: the actor on A, the subscribers on B. */
async function crossProcessFanout(options: api.TroupeOptions, upstreamPid: number, exits: Record<string, string>, log: Log) {
  const store = await api.freshStore('postgres', cfg.databaseUrl);
  const shared = { ...options, keepOutput: true, settings: { ...store.env, REDIS_URL: cfg.redisUrl }, key: api.newBootstrapKey() };
  let [a, b]: (api.Troupe | null)[] = [null, null];
  try {
    a = await api.startTroupe({ ...shared, name: `troupe-${shared.engine}-A` });
    const conversationId = await api.createConversation(a, await api.createCharacter(a, 'Gate Guard'));
    // Creates the conversation's actor on A, the only process so far.
    await api.postMessage(a, conversationId, `${STAMP_PREFIX} placement`);
    b = await api.startTroupe({ ...shared, name: `troupe-${shared.engine}-B` });
    const actorProcessId = (await api.roomPlacement(cfg.redisUrl)).get(conversationId) ?? null;
    const [aProcessId, bProcessId] = [api.colyseusProcessId(a.child.output()), api.colyseusProcessId(b.child.output())];
    const onA = actorProcessId && aProcessId ? actorProcessId === aProcessId : null;
    if (onA === false) throw new Error(`the conversation's actor runs on ${actorProcessId}, not on A (${aProcessId})`);
    const watch = [{ name: 'troupeA', pid: a.child.pid }, { name: 'troupeB', pid: b.child.pid }, { name: 'upstream', pid: upstreamPid }];
    return { fanout: await runFanout(a, b, conversationId, watch, log), placement: { actorProcessId, aProcessId, bProcessId, onA } };
  } finally {
    if (b) exits.fanoutRedisB = await b.stop(10_000);
    if (a) exits.fanoutRedisA = await a.stop(10_000);
    await store.dispose().catch((err: unknown) => log(`could not drop ${store.url}: ${(err as Error).message}`));
  }
}
const summarizePath = ({ label: target, scheduled, ok, errors, achievedRps, maxInFlight, total, lag }: TargetRun) => ({
  target, scheduled, ok, errorCount: sum(Object.values(errors)), errors, achievedRps, latency: summarize(total),
  p99Noise: splitHalfSpread(total, 99), lag: summarize(lag), maxInFlight,
});
function compareRate(engine: string, direct: TargetRun, perform: TargetRun) {
  const [d, p] = [summarizePath(direct), summarizePath(perform)];
  const verdict: string[] = [];
  for (const s of [d, p]) {
    if (s.achievedRps < SUSTAIN.minAchievedRatio * direct.rate) verdict.push(`${s.target} achieved ${s.achievedRps.toFixed(0)} req/s`);
    if (s.scheduled > 0 && s.errorCount / s.scheduled > SUSTAIN.maxErrorRate) verdict.push(`${s.target} ${s.errorCount} errors`);
    if (!(s.latency.p99 <= cfg.maxP99Ms)) verdict.push(`${s.target} p99 ${s.latency.p99.toFixed(1)} ms > ${cfg.maxP99Ms} ms`);
  }
  return {
    engine, rate: direct.rate, direct: d, perform: p, sustained: verdict.length === 0, verdict,
    added: { p50: p.latency.p50 - d.latency.p50, p99: p.latency.p99 - d.latency.p99, p99Noise: Math.max(d.p99Noise, p.p99Noise) },
    generatorSuspect: Math.max(d.lag.p99, p.lag.p99) > SUSTAIN.maxGeneratorLagP99Ms || (direct.cpu?.benchEventLoop ?? 0) > 0.9,
    cpu: direct.cpu ?? proc.NO_CPU,
    /** Troupe's GC pauses inside the measured window (filled in after the ladder). */
    gc: null as { count: number; totalMs: number; maxMs: number; longPauses: number; major: number } | null,
  };
}
/** The rates in turn until one is not sustained, then Troupe's GC pauses in each one's measured window. */
async function performLadder(troupe: api.Troupe, characterId: string, upstream: Launched, run: EngineRun, log: Log) {
  const expected = Buffer.from(expectedPerformBody(cfg.performTokens));
  const { perform, direct, preflight } = await performTargets(troupe, characterId, PLAYER_LINE, upstream.port, expected);
  run.performPreflight = preflight;
  const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
  const [before, windows] = [(await probeTroupe(troupe)).memory, [] as TargetRun['monotonicUs'][]];
  for (const rate of cfg.performRates) {
    await quiet(watch);
    const [d, p] = await runLoad([direct, perform], { rate, warmupSec: cfg.performWarmupSec, durationSec: cfg.performDurationSec, watch });
    if (!d || !p) throw new Error('runLoad returned fewer results than targets');
    const r = compareRate(run.engine, d, p);
    run.perform.push(r);
    windows.push(d.monotonicUs);
    log(`perform @ ${rate} req/s: added p99 ${r.added.p99.toFixed(2)} ms${r.sustained ? '' : `, NOT sustained: ${r.verdict.join('; ')}`}`);
    if (!r.sustained && !cfg.keepGoing) break;
  }
  const after = await probeTroupe(troupe);
  for (const [i, r] of run.perform.entries()) {
    // GC pauses [start µs, ms, kind] that started inside the window (CLOCK_MONOTONIC µs); kind 4: major (mark-sweep-compact).
    const inside = after.gcEvents.filter(([at]) => at >= windows[i]!.start && at <= windows[i]!.end);
    const pauses = inside.map(([, ms]) => ms);
    const [major, longPauses] = [inside.filter(([, , kind]) => kind === 4).length, pauses.filter((ms) => ms >= 5).length];
    r.gc = { count: inside.length, totalMs: sum(pauses), maxMs: Math.max(0, ...pauses), longPauses, major };
  }
  run.performMemory = { before, after: after.memory };
}
const newRun = (engine: api.Engine, nodeBinary: string) => ({
  engine, nodeBinary, fanout: null as Awaited<ReturnType<typeof runFanout>> | null,
  fanoutCrossProcess: null as Awaited<ReturnType<typeof crossProcessFanout>> | null, perform: [] as ReturnType<typeof compareRate>[],
  performPreflight: null as Awaited<ReturnType<typeof performTargets>>['preflight'] | null,
  /** Troupe's memory (after a full GC) before and after the perform rates: retention shows here. */
  performMemory: null as { before: MemorySample; after: MemorySample } | null, idle: null as Awaited<ReturnType<typeof runIdle>> | null,
  troupeExits: {} as Record<string, string>, errors: [] as string[],
});
type EngineRun = ReturnType<typeof newRun>;
async function benchEngine(engine: api.Engine, nodeBinary: string, upstream: Launched, baseLog: Log) {
  const run = newRun(engine, nodeBinary);
  const log: Log = (line) => baseLog(`${engine} ${line}`);
  // A failed part is reported (its result null) and the others still run.
  const attempt = <T>(part: string, body: () => Promise<T>) => body().catch((err: unknown) => {
    run.errors.push(`${part}: ${(err as Error).message}`);
    log(`${part} failed: ${(err as Error).message}`);
    return null;
  });
  const wants = (part: (typeof PARTS)[number]) => cfg.parts.includes(part);
  // Every Troupe here: `ulimit -n` raised and the probe with --expose-gc.
  const options = { engine, nodeBinary, logLevel: cfg.logLevel, fdLimit: 65_536, probe: { gc: true }, readyTimeoutMs: 90_000,
    upstream: { url: `http://127.0.0.1:${upstream.port}/v1`, model: BENCH_MODEL } };
  if (wants('fanout') || wants('perform')) {
    const troupe = await api.startTroupe(options);
    try {
      const characterId = await api.createCharacter(troupe, 'Gate Guard');
      const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
      const fanout = async () => runFanout(troupe, troupe, await api.createConversation(troupe, characterId), watch, log);
      if (wants('fanout')) run.fanout = await attempt('fan-out', fanout);
      if (wants('perform')) await attempt('perform', () => performLadder(troupe, characterId, upstream, run, log));
    } finally {
      run.troupeExits.fanoutPerform = await troupe.stop(10_000);
    }
  }
  const crossProcess = () => crossProcessFanout(options, upstream.pid, run.troupeExits, log);
  if (wants('fanout-redis')) run.fanoutCrossProcess = await attempt('fan-out across processes', crossProcess);
  if (wants('sockets')) {
    // File descriptors for the sockets and 2,048 more.
    const troupe = await api.startTroupe({ ...options, logLevel: cfg.socketsLogLevel, fdLimit: cfg.sockets + 2_048 });
    const holders: Holder[] = [];
    run.idle = await attempt('idle sockets', () => runIdle(troupe, holders, cfg));
    // Troupe first: it closes the sockets from its side, so the clients' ports are not left in TIME_WAIT.
    run.troupeExits.sockets = await troupe.stop(30_000);
    await Promise.all(holders.map((h) => h.stop()));
  }
  return run;
}
const f = (v: number | null | undefined, digits = 2) => fixed(v, digits, 'n/a');
const kib = (bytes: number | null | undefined) => f(bytes === null || bytes === undefined ? null : bytes / 1024);
const signed = (v: number) => (Number.isFinite(v) && v >= 0 ? '+' : '') + f(v);
const pct = (v: number | null | undefined) => fixed(v, 0, '?');
const p50p99 = (s: { p50: number; p99: number }, digits = 3) => `${f(s.p50, digits)} / ${f(s.p99, digits)}`;
const errorList = (errors: Record<string, number>) => Object.entries(errors).map(([k, v]) => `${k}:${v}`).join(' ');
const errorsCell = (s: ReturnType<typeof summarizePath>) => (s.errorCount === 0 ? '0' : `${s.errorCount} (${errorList(s.errors)})`);
/** CPU % of every watched Troupe process together (one, or A and B across processes); NaN when one is unknown. */
const troupeCpu = (cpu: proc.CpuWindow) =>
  sum(Object.entries(cpu.children).filter(([name]) => name.startsWith('troupe')).map(([, share]) => share ?? Number.NaN));
function conversationsMarkdown(runs: readonly EngineRun[], head: string, tail: string[]): string {
  const out: string[] = ['', `## Conversations benchmark (${new Date().toISOString()})`, '', head, ''];
  const idle = runs.flatMap((r) => (r.idle ? [{ engine: r.engine, r: r.idle }] : []));
  if (idle.length > 0) {
    out.push('### (a) Idle conversation WebSockets on one Troupe process', '', `Troupe LOG_LEVEL=${cfg.socketsLogLevel}; memory after a ` +
      'full GC, once steady; per socket = (after - before) / open; "2nd half" = (after - half) / added since.', '', markdownTable(
      ['engine', 'sockets open / requested', 'conversations', 'Troupe RSS before → half → after (MiB)', 'RSS per socket (KiB)',
        `≤ ${cfg.socketGoalBytes / 1024} KiB`, 'RSS per socket, 2nd half (KiB)', 'V8 heap used per socket (KiB)',
        'V8 heap used per socket, 2nd half (KiB)', 'client RSS per socket (KiB, procs)', 'connect time (s)', 'failures', 'liveness'],
      idle.map(({ engine, r }) => [
        engine, `${r.openAtSample} / ${r.plan.requested}${r.plan.target < r.plan.requested ? ' (capped)' : ''}`, r.plan.conversations,
        `${mib(r.troupeBefore.rss)} → ${r.troupeHalf ? mib(r.troupeHalf.rss) : '?'} → ${mib(r.troupeAfter.rss)}`,
        kib(r.perSocket?.rssBytes), r.perSocket ? (r.perSocket.rssBytes <= cfg.socketGoalBytes ? 'yes' : 'no') : 'n/a',
        kib(r.marginalPerSocket?.rssBytes), kib(r.perSocket?.heapUsedBytes), kib(r.marginalPerSocket?.heapUsedBytes),
        `${kib(r.clientPerSocketRssBytes)} (${r.clientProcesses})`, r.connectSec.toFixed(1),
        r.failed === 0 && r.unexpectedCloses === 0 ? '0' : `${r.failed} failed, ${r.unexpectedCloses} closed (${errorList(r.errors)})`,
        r.liveness ? `${r.liveness.received}/${r.liveness.expected} got a reply` : 'not checked',
      ]),
      'lrrrrlrrrrrrl',
    ), '', ...idle.flatMap(({ engine, r: { plan: p } }) =>
      (p.capReason ? [`${engine}: ${p.requested} sockets requested, ${p.target} opened at most: ${p.capReason}.`] : [])), '');
  }
  const fan = runs.flatMap((r) => [
    ...(r.fanout ? [{ engine: `${r.engine}, one process`, r: r.fanout }] : []),
    ...(r.fanoutCrossProcess ? [{ engine: `${r.engine}, A → Redis → B`, r: r.fanoutCrossProcess.fanout }] : []),
  ]);
  if (fan.length > 0) {
    out.push(`### (b) Chunk fan-out to ${cfg.fanoutSubscribers} subscribers of one conversation`, '', `${cfg.fanoutMessages} messages ` +
      `(after ${cfg.fanoutWarmup} warm-up) of ${cfg.fanoutChunks} chunks ${cfg.fanoutGapMs} ms apart; spread = last - first arrival per ` +
      'chunk, latency = arrival - upstream write; A → Redis → B: posted on A, subscribers on B. Times in ms.', '', markdownTable(
      ['engine', 'subscribers', 'chunks (msgs × chunks)', 'spread p50', 'spread p99', 'latency p50', 'latency p99',
        'first-sub. latency p50 / p99', 'last-sub. latency p50 / p99', 'POST message p50 / p99', 'missing',
        'CPU % troupe (all) / upstream / bench'],
      fan.map(({ engine, r }) => [
        engine, r.subscribers, `${r.completeChunks} (${r.messages} × ${r.chunksPerMessage})`, f(r.spreadMs.p50, 3), f(r.spreadMs.p99, 3),
        f(r.latencyMs.p50, 3), f(r.latencyMs.p99, 3), p50p99(r.firstSubscriberLatencyMs), p50p99(r.lastSubscriberLatencyMs),
        p50p99(r.httpMessageMs, 1), `${r.missingDeliveries} of ${r.expectedDeliveries}`,
        `${pct(troupeCpu(r.cpu))} / ${pct(r.cpu.children.upstream)} / ${pct(r.cpu.bench)}`,
      ]),
    ), '');
  }
  const rates = runs.flatMap((r) => r.perform);
  if (rates.length > 0) {
    const gaps = cfg.performGapMs > 0 ? ` ${cfg.performGapMs} ms apart` : ' in one burst';
    out.push('### (c) POST /perform vs the upstream alone', '', `Open loop, ${cfg.performDurationSec} s after ${cfg.performWarmupSec} s ` +
      `warm-up per rate; direct = Troupe's upstream request replayed; reply ${cfg.performTokens} chunks${gaps}; latency to last byte, ` +
      `ms; Troupe LOG_LEVEL=${cfg.logLevel}.`, '', markdownTable(
      ['engine', 'offered req/s', 'achieved direct / perform', 'direct p50', 'direct p99', 'perform p50', 'perform p99', 'added p50',
        'added p99 (±noise)', `added p99 ≤ ${cfg.performGoalMs} ms`, 'errors direct / perform', 'gen. lag p99',
        'CPU % troupe / upstream / bench / other', 'Troupe CPU per perform (ms)', 'Troupe GC: total ms / longest pause ms', 'sustained'],
      rates.map(({ direct: d, perform: p, cpu, ...r }) => [
        r.engine, r.rate, `${d.achievedRps.toFixed(0)} / ${p.achievedRps.toFixed(0)}`, f(d.latency.p50), f(d.latency.p99),
        f(p.latency.p50), f(p.latency.p99), signed(r.added.p50), `${signed(r.added.p99)} (±${f(r.added.p99Noise)})`,
        Number.isFinite(r.added.p99) ? (r.added.p99 <= cfg.performGoalMs ? 'yes' : 'no') : 'n/a',
        `${errorsCell(d)} / ${errorsCell(p)}`, `${f(Math.max(d.lag.p99, p.lag.p99))}${r.generatorSuspect ? ' ⚠' : ''}`,
        `${pct(cpu.children.troupe)} / ${pct(cpu.children.upstream)} / ${pct(cpu.bench)} / ${pct(cpu.other)}`,
        // Troupe serves only these performs in the window.
        p.achievedRps > 0 ? f(((cpu.children.troupe ?? Number.NaN) / 100 / p.achievedRps) * 1000) : 'n/a',
        r.gc ? `${r.gc.totalMs.toFixed(0)} / ${r.gc.maxMs.toFixed(1)}` : 'n/a', r.sustained ? 'yes' : `no: ${r.verdict.join('; ')}`,
      ]),
      'lrrrrrrrrlrrrrrl',
    ), '');
    out.push(...runs.flatMap(({ engine, performMemory: m }) => (m ? [`${engine}: Troupe after a full GC: heap used ` +
      `${mib(m.before.heapUsed)} MiB before the perform rates, ${mib(m.after.heapUsed)} MiB after; RSS ${mib(m.before.rss)} → ` +
      `${mib(m.after.rss)} MiB (peak ${mib(m.after.peakRss)} MiB).`] : [])), '');
  }
  return [...out, ...tail].join('\n');
}
runBench('bench:conversations', cfg.maxRunSec * 1000, async ({ started, stamp, log }) => {
  const git = await gitState();
  const { path: uwsPath, note: uwsNote } = await api.uwsEngineNode(cfg.engines.includes('uws'), log);
  const upstream = await startUpstream({ BENCH_REPLY_TOKENS: String(cfg.performTokens), BENCH_REPLY_GAP_MS: String(cfg.performGapMs),
    BENCH_STAMP_TOKENS: String(cfg.fanoutChunks), BENCH_STAMP_GAP_MS: String(cfg.fanoutGapMs) });
  const [runs, skipped]: [EngineRun[], { engine: api.Engine; reason: string }[]] = [[], []];
  try {
    for (const engine of cfg.engines) {
      const nodeBinary = engine === 'uws' ? uwsPath : process.execPath;
      if (nodeBinary) runs.push(await benchEngine(engine, nodeBinary, upstream, log));
      else skipped.push({ engine, reason: uwsNote });
    }
  } finally {
    await upstream.stop(5_000);
  }
  const elapsedSec = (Date.now() - started) / 1000;
  const context = { ...machine(), totalMemMiB: Math.round(totalmem() / MIB), uwsNode: uwsNote,
    benchFdLimit: proc.fileLimits('self')?.soft ?? null, ephemeralPorts: proc.ephemeralPortCount(), git, elapsedSec };
  const changes = git.dirtySrc.length > 0 ? ` with uncommitted changes in ${git.dirtySrc.join(', ')}` : '';
  const markdown = conversationsMarkdown(runs, `Machine: ${context.cpus} CPUs (${context.cpuModel}), ${context.totalMemMiB} MiB; ` +
    `Node ${process.version}; Troupe ${git.head}${changes}. Everything (clients, upstream, Troupe) on this machine, 127.0.0.1.`, [
    ...skipped.map((s) => `${s.engine}: skipped, ${s.reason}`),
    ...runs.flatMap((r) => r.errors.map((e) => `${r.engine}: ERROR ${e}`)),
    `Total run time: ${elapsedSec.toFixed(1)} s.`,
  ]);
  process.stdout.write(`${markdown}\n`);
  // Every figure rounded to 3 decimals (µs for times); NaN becomes null.
  const engines: unknown = JSON.parse(JSON.stringify(runs, (_key, v: unknown) => (typeof v === 'number' ? round3(v) : v)));
  const paths = await writeResults('conversations', stamp, { context, config: cfg, skipped, engines }, markdown);
  process.stdout.write(`\nResults written to ${paths.json} and ${paths.markdown}\n`);
  if (runs.some((r) => r.errors.length > 0)) process.exitCode = 1;
});
