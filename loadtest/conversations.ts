/**
 * `npm run bench:conversations`, per HTTP engine (node; uws when a Node here can load uWebSockets.js):
 *   (a) sockets: N idle conversation WebSockets on one Troupe (clients in socket-holder processes): its memory per socket.
 *   (b) fanout: stamped upstream chunks fanned out to the subscribers of one conversation: spread and latency per chunk.
 *   (b') fanout-redis: the same with the actor on Troupe A and the subscribers on B (PostgreSQL + Redis).
 *   (c) perform: open-loop POST /perform interleaved with Troupe's own upstream request replayed: Troupe's added latency.
 * Writes loadtest/results/conversations-<stamp>.{json,md}. Environment (defaults in brackets): BENCH_ENGINES [node,uws]
 *   BENCH_PARTS [sockets,fanout,fanout-redis,perform]  BENCH_DATABASE_URL [postgres://postgres@127.0.0.1:5432/test]
 *   BENCH_REDIS_URL [redis://127.0.0.1:6379]  BENCH_SOCKETS [10000] (capped by ephemeral ports and file descriptors)
 *   BENCH_CONVERSATIONS [100]  BENCH_SOURCE_ADDRESSES [127.0.0.1] (more loopback addresses lift the port cap)
 *   BENCH_SOCKETS_PER_CLIENT [15000]  BENCH_CONNECT_CONCURRENCY [200]  BENCH_SOCKETS_LOG_LEVEL [warn]  BENCH_SOCKET_GOAL_BYTES [4096]
 *   BENCH_FANOUT_SUBSCRIBERS [10]  BENCH_FANOUT_MESSAGES [25]  BENCH_FANOUT_WARMUP [3]  BENCH_FANOUT_CHUNKS [40]  BENCH_FANOUT_GAP_MS [5]
 *   BENCH_PERFORM_RATES [50,100,200,400]  BENCH_PERFORM_DURATION s [10]  BENCH_PERFORM_WARMUP s [2]  BENCH_PERFORM_TOKENS [40]
 *   BENCH_PERFORM_GAP_MS [0: one burst]  BENCH_PERFORM_GOAL_MS [2]  BENCH_MAX_P99_MS [100] (above: not sustained)
 *   BENCH_KEEP_GOING (1: every rate)  BENCH_LOG_LEVEL [info]  BENCH_CPU_PROF (1: Troupe of b+c under --cpu-prof, top frames
 *   over the perform windows)  BENCH_QUIET_WAIT s [10] / BENCH_QUIET_PERCENT [60]: wait for the rest of the machine before a
 *   phase  BENCH_MAX_RUN_SEC [3600]  UWS_NODE (else `bash .ci/uws-node.sh`)
 */
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { WebSocket } from 'ws';
import { childEnv, delay, gitState, machine, parseJson, ROOT, runBench, spawnTracked, withFileLimit } from './support/children.ts';
import type { Launched, Log } from './support/children.ts';
import { envDatabaseUrl, envFlag, envList, envLogLevel, envNumber as num, envRates, envText } from './support/env.ts';
import { performTargets, runLoad, type TargetRun } from './support/load.ts';
import * as proc from './support/proc.ts';
import { profileText } from './support/profile.ts';
import { fixed, markdownTable, RESULTS_DIR, round3, splitHalfSpread, summarize, writeResults } from './support/report.ts';
import { openReadySocket, wsUrl } from './support/sockets.ts';
import * as api from './support/troupe.ts';
import { BENCH_MODEL, expectedPerformBody, parseStamps, STAMP_PREFIX, startUpstream } from './support/upstream.ts';

type Troupe = api.Troupe;
type Window = { start: number; end: number };
const PARTS = ['sockets', 'fanout', 'fanout-redis', 'perform'] as const;
/** Ephemeral ports left for everything else; file descriptors asked for Troupe beyond the sockets, and left free in it. */
const [PORT_RESERVE, FD_SLACK, FD_MARGIN] = [2_000, 2_048, 64];
const [CONNECT_TIMEOUT_MS, SETTLE_MS, WARMUP_SOCKETS, FANOUT_PAUSE_MS, FANOUT_TIMEOUT_MS] = [30_000, 3_000, 500, 50, 15_000];
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
  keepGoing: envFlag('BENCH_KEEP_GOING'), logLevel: envLogLevel('BENCH_LOG_LEVEL', 'info'), cpuProf: envFlag('BENCH_CPU_PROF'),
  maxRunSec: num('BENCH_MAX_RUN_SEC', 3600, 60), quietWaitSec: num('BENCH_QUIET_WAIT', 10, 0),
  quietPercent: num('BENCH_QUIET_PERCENT', 60, 1), databaseUrl: envDatabaseUrl(),
  redisUrl: envText('BENCH_REDIS_URL') ?? 'redis://127.0.0.1:6379',
};
const MIB = 2 ** 20;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

/** Waits (at most BENCH_QUIET_WAIT s) for the rest of the machine to calm down before a measured phase. */
const quiet = (watch: readonly proc.WatchedProcess[]) =>
  cfg.quietWaitSec > 0 && proc.waitForQuiet(cfg.quietWaitSec, cfg.quietPercent, watch);

/** A full GC in Troupe, then its memory (VmRSS, VmHWM from /proc right after it), with its GC pauses [start µs, ms, kind] so far. */
async function probeTroupe(troupe: Troupe) {
  const r = await troupe.probe();
  const mem = proc.processMemory(troupe.child.pid);
  if (!mem) throw new Error(`cannot read /proc/${troupe.child.pid}/status`);
  const n = (key: string) => Number(r[key]);
  const memory = {
    rss: mem.rss, peakRss: mem.peakRss, heapUsed: n('heapUsed'), heapTotal: n('heapTotal'), external: n('external'),
    arrayBuffers: n('arrayBuffers'), mallocedMemory: n('mallocedMemory'), gc: r.gc === true,
  };
  return { memory, gcEvents: (r.gcEvents as [number, number, number][] | undefined) ?? [] };
}
type MemorySample = Awaited<ReturnType<typeof probeTroupe>>['memory'];

/** How many idle sockets fit (ports per source address, Troupe's file descriptors), spread over socket-holder processes. */
function planSockets(troupe: Troupe) {
  const ports = proc.ephemeralPortCount() ?? 28_232;
  const perSource = Math.max(0, ports - PORT_RESERVE);
  // Raising the hard limit needs CAP_SYS_RESOURCE (root alone is not enough, e.g. in containers).
  const fdMax = proc.canRaiseHardLimits() ? (proc.maxFileLimit() ?? 1_048_576) : (proc.fileLimits('self')?.hard ?? 1024);
  // What Troupe actually got decides: the wrapper falls back to the hard limit when raising fails.
  const [fdLimit, inUse] = [proc.fileLimits(troupe.child.pid)?.soft ?? fdMax, proc.openFileCount(troupe.child.pid) ?? 0];
  const caps: [limit: number, reason: string][] = [
    [perSource * cfg.sourceAddresses.length, `ports: ${ports} ephemeral ports less ${PORT_RESERVE} per source address`],
    [Math.max(0, fdLimit - inUse - FD_MARGIN), `file descriptors: Troupe got ulimit -n ${fdLimit}, uses ${inUse}, less ${FD_MARGIN}`],
  ];
  const target = Math.min(cfg.sockets, ...caps.map(([limit]) => limit));
  const perClient = Math.max(100, Math.min(cfg.socketsPerClient, fdMax - 1024));
  // Each source address takes up to perSource sockets, in holders of up to perClient.
  const holders = cfg.sourceAddresses.flatMap((localAddress, a) => {
    const share = Math.max(0, Math.min(perSource, target - a * perSource));
    const count = (i: number) => Math.min(perClient, share - i * perClient);
    return Array.from({ length: Math.ceil(share / perClient) }, (_, i) => ({ localAddress, count: count(i) }));
  });
  const binding = caps.filter(([limit]) => limit < cfg.sockets).sort((x, y) => x[0] - y[0]);
  const capReason = binding.map(([limit, reason], i) => `${i === 0 ? 'limit' : 'also'}: ${reason} (${limit})`).join('; ') || null;
  return { requested: cfg.sockets, target, capReason, conversations: Math.min(cfg.conversations, target), holders };
}

/** Samples 2 s apart until RSS and V8's committed heap hold steady (twice within 2 MiB), at most 15 times: V8 and malloc
 * give memory back gradually after a burst, and a sample taken meanwhile would count that as a change. */
async function settledMemory(troupe: Troupe) {
  const rssSamples: number[] = [];
  let [previous, calm]: [MemorySample | null, number] = [null, 0];
  for (let i = 0; i < 15 && calm < 2; i++) {
    if (i > 0) await delay(2_000);
    const sample = (await probeTroupe(troupe)).memory;
    rssSamples.push(sample.rss);
    const near = (k: 'rss' | 'heapTotal') => previous !== null && Math.abs(sample[k] - previous[k]) <= 2 * MIB;
    calm = near('rss') && near('heapTotal') ? calm + 1 : 0;
    previous = sample;
  }
  return { ...previous!, rssSamples, settled: calm >= 2 };
}

type HolderStats = { open: number; unexpectedCloses: number; doneChunks: number; rss: number; heapUsed: number; fdLimit: number | null };
type Holder = ReturnType<typeof startHolder>;

/** A socket-holder.ts process (`ulimit -n` raised): one JSON command per stdin line, one answer per stdout line, in turn. */
function startHolder(name: string, fdLimit: number) {
  let settle = (_answer: Record<string, unknown> | Error): void => {};
  const onLine = (line: string) => {
    const answer = parseJson(line);
    if (answer) settle(answer.op === 'error' ? new Error(`${name}: ${String(answer.message)}`) : answer);
  };
  const command = withFileLimit(fdLimit, process.execPath, ['--expose-gc', 'loadtest/conversation-support/socket-holder.ts']);
  const holder = spawnTracked({ name, ...command, cwd: ROOT, env: childEnv({}), stdin: 'pipe', onLine });
  const gone = () => new Error(`${name} exited: ${holder.tail().slice(-500)}`);
  void holder.exited.then(() => settle(gone()));
  holder.child.stdin.on('error', () => {}); // the exit handler reports it
  return {
    // After a timeout the part fails, so a late answer is never taken for another command's.
    ask: <T>(cmd: Record<string, unknown>, timeoutMs: number) => new Promise<T>((resolve, reject) => {
      if (holder.exitInfo()) return reject(gone());
      const timer = setTimeout(() => settle(new Error(`${name}: no answer to ${String(cmd.op)} within ${timeoutMs} ms`)), timeoutMs);
      settle = (answer) => {
        clearTimeout(timer);
        settle = () => {};
        if (answer instanceof Error) reject(answer);
        else resolve(answer as T);
      };
      holder.child.stdin.write(`${JSON.stringify(cmd)}\n`);
    }),
    // Closing stdin asks it to exit (SIGCONT does nothing); SIGKILL after 10 s.
    stop: () => (holder.child.stdin.end(), holder.stop(10_000, 'SIGCONT')),
  };
}

/** The caller stops `holders` after Troupe: it closes the sockets from its side, so the clients' ports are not left in TIME_WAIT. */
async function runIdle(troupe: Troupe, holders: Holder[]) {
  const plan = planSockets(troupe);
  const characterId = await api.createCharacter(troupe, 'Innkeeper');
  const conversations: string[] = [];
  while (conversations.length < plan.conversations) {
    const batch = Math.min(8, plan.conversations - conversations.length);
    conversations.push(...(await Promise.all(Array.from({ length: batch }, () => api.createConversation(troupe, characterId)))));
  }
  for (const [i, h] of plan.holders.entries()) holders.push(startHolder(`socket-holder-${i}`, h.count + 1024));
  const stats = () => Promise.all(holders.map((h) => h.ask<HolderStats>({ op: 'stats' }, 60_000)));
  const connect = (i: number, count: number, offset: number) => {
    const { base, key: token } = troupe;
    const localAddress = plan.holders[i]?.localAddress === '127.0.0.1' ? undefined : plan.holders[i]?.localAddress;
    const cmd = { op: 'connect', base, token, conversations, count, offset, concurrency: cfg.connectConcurrency, localAddress };
    type Connected = { ok: number; errors: Record<string, number>; ms: number };
    return holders[i]!.ask<Connected>({ ...cmd, timeoutMs: CONNECT_TIMEOUT_MS }, Math.max(120_000, count * 20) + CONNECT_TIMEOUT_MS);
  };
  // Warm-up: Troupe's upgrade path compiled and its one-time structures allocated before "before".
  if (holders[0]) {
    await connect(0, Math.min(WARMUP_SOCKETS, plan.target), 0);
    await holders[0].ask({ op: 'close' }, 60_000);
    await delay(1_000);
  }
  const client = (s: HolderStats[]) => ({ rss: sum(s.map((x) => x.rss)), heapUsed: sum(s.map((x) => x.heapUsed)) });
  const clientBefore = client(await stats());
  const before = await settledMemory(troupe);
  // Two steps (each holder its first half, then the rest) with a sample in between: the slope over
  // the second half leaves out one-time growth the first sockets trigger.
  const errors: Record<string, number> = {};
  let [opened, connectMs, next] = [0, 0, 0];
  let half: { sample: typeof before; open: number } | null = null;
  for (const step of [0, 1]) {
    const results = await Promise.all(plan.holders.map((h, i) => {
      const count = step === 0 ? Math.floor(h.count / 2) : Math.ceil(h.count / 2);
      return connect(i, count, (next += count) - count);
    }));
    for (const r of results) {
      opened += r.ok;
      for (const [k, v] of Object.entries(r.errors)) errors[k] = (errors[k] ?? 0) + v;
    }
    // Holders connect in parallel: a step lasts as long as its slowest holder.
    connectMs += Math.max(0, ...results.map((r) => r.ms));
    await delay(SETTLE_MS);
    if (step === 0) half = { open: sum((await stats()).map((s) => s.open)), sample: await settledMemory(troupe) };
  }
  const after = await settledMemory(troupe);
  const afterStats = await stats();
  const [openAtSample, unexpectedCloses] = [sum(afterStats.map((s) => s.open)), sum(afterStats.map((s) => s.unexpectedCloses))];
  // Liveness: every socket of the first conversation (socket i joins conversation i mod n) gets a reply's done chunk.
  let liveness: { conversation: string; expected: number; received: number; ms: number } | null = null;
  const [conversation, expected] = [conversations[0], Math.ceil(plan.target / conversations.length)];
  if (conversation && expected > 0 && unexpectedCloses === 0) {
    const [l0, doneBefore] = [Date.now(), sum(afterStats.map((s) => s.doneChunks))];
    await api.postMessage(troupe, conversation, 'Are you still there?');
    let received = 0;
    for (const deadline = Date.now() + 15_000; Date.now() < deadline && received < expected; await delay(200)) {
      received = sum((await stats()).map((s) => s.doneChunks)) - doneBefore;
    }
    liveness = { conversation, expected, received, ms: Date.now() - l0 };
  }
  const per = (key: keyof MemorySample) => (Number(after[key]) - Number(before[key])) / openAtSample;
  const added = half ? openAtSample - half.open : 0;
  const clientAfter = client(afterStats);
  return {
    plan, opened, failed: plan.target - opened, errors, connectSec: connectMs / 1000, openAtSample, unexpectedCloses,
    troupeBefore: before, troupeAfter: after,
    perSocket: openAtSample > 0 ? { rssBytes: per('rss'), heapUsedBytes: per('heapUsed'), externalBytes: per('external'),
      mallocedBytes: per('mallocedMemory') } : null,
    troupeHalf: half?.sample ?? null,
    /** Slope between the half and the full sample: memory per socket without one-time growth. */
    marginalPerSocket: half && added > 0 ? {
      fromSockets: half.open, toSockets: openAtSample, rssBytes: (after.rss - half.sample.rss) / added,
      heapUsedBytes: (after.heapUsed - half.sample.heapUsed) / added,
    } : null,
    clientBefore, clientAfter, clientPerSocketRssBytes: openAtSample > 0 ? (clientAfter.rss - clientBefore.rss) / openAtSample : null,
    clientProcesses: holders.length, clientFdLimits: afterStats.map((s) => s.fdLimit), liveness,
  };
}

/** Posts on `troupe`, takes in the chunks on subscriber sockets of `via` (all on this thread: the spread is an upper bound
 * of Troupe's). Spread = last minus first arrival per chunk; latency = arrival minus the upstream's stamp. */
async function runFanout(troupe: Troupe, via: Troupe, conversationId: string, watch: readonly proc.WatchedProcess[], log: Log) {
  const n = cfg.fanoutSubscribers;
  const inbox: { at: number; data: Buffer }[][] = Array.from({ length: n }, () => []);
  const sockets: WebSocket[] = [];
  const [spread, latency, firstLatency, lastLatency, httpMs]: [number[], number[], number[], number[], number[]] = [[], [], [], [], []];
  let [completeChunks, missing, stopCpu] = [0, 0, null as (() => proc.CpuWindow) | null];
  await quiet(watch);
  try {
    for (const [i, box] of inbox.entries()) {
      const onMessage = (data: Buffer, at: number) => void box.push({ at, data });
      const ws = await openReadySocket(wsUrl(via.base, conversationId, via.key), { timeoutMs: FANOUT_TIMEOUT_MS, onMessage })
        .catch((err: Error & { kind?: string }) => Promise.reject(new Error(`subscriber ${i}: ${err.kind}: ${err.message}`)));
      sockets.push(ws);
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
      // Per chunk index: the upstream's write time (µs) and the arrival at each subscriber.
      const arrivals = new Map<number, { written: number; at: number[] }>();
      for (const { at, data } of inbox.flat()) {
        const event = JSON.parse(data.toString('utf8')) as { type?: string; content?: string };
        for (const stamp of event.type === 'chunk' ? parseStamps(event.content ?? '') : []) {
          const entry = arrivals.get(stamp.index) ?? { written: stamp.micros, at: [] };
          entry.at.push(at);
          arrivals.set(stamp.index, entry);
          latency.push((at - stamp.micros) / 1000);
        }
      }
      for (let c = 0; c < cfg.fanoutChunks; c++) {
        const entry = arrivals.get(c);
        missing += Math.max(0, n - (entry?.at.length ?? 0));
        if (!entry || entry.at.length < n) continue;
        completeChunks++;
        const [first, last] = [Math.min(...entry.at), Math.max(...entry.at)];
        spread.push((last - first) / 1000);
        firstLatency.push((first - entry.written) / 1000);
        lastLatency.push((last - entry.written) / 1000);
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
  let [a, b]: (Troupe | null)[] = [null, null];
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

/** Troupe's GC pauses [start µs, ms, kind] that started inside the window (µs, CLOCK_MONOTONIC). */
function gcInWindow(events: readonly [number, number, number][], window: Window) {
  const inside = events.filter(([at]) => at >= window.start && at <= window.end);
  const [totalMs, maxMs] = [sum(inside.map(([, ms]) => ms)), Math.max(0, ...inside.map(([, ms]) => ms))];
  const major = inside.filter(([, , kind]) => kind === 4).length;
  return { count: inside.length, totalMs, maxMs, longPauses: inside.filter(([, ms]) => ms >= 5).length, major };
}

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
    gc: null as ReturnType<typeof gcInWindow> | null,
  };
}

/** The rates in turn until one is not sustained; `windows` gets each one's measured window (CLOCK_MONOTONIC µs). */
async function performLadder(troupe: Troupe, characterId: string, upstream: Launched, run: EngineRun, windows: Window[], log: Log) {
  const expected = Buffer.from(expectedPerformBody(cfg.performTokens));
  const { perform, direct, preflight } = await performTargets(troupe, characterId, PLAYER_LINE, upstream.port, expected);
  run.performPreflight = preflight;
  const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
  const before = (await probeTroupe(troupe)).memory;
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
  run.perform.forEach((r, i) => (r.gc = gcInWindow(after.gcEvents, windows[i]!)));
  run.performMemory = { before, after: after.memory };
}

const newRun = (engine: api.Engine, nodeBinary: string) => ({
  engine, nodeBinary, fanout: null as Awaited<ReturnType<typeof runFanout>> | null,
  fanoutCrossProcess: null as Awaited<ReturnType<typeof crossProcessFanout>> | null, perform: [] as ReturnType<typeof compareRate>[],
  performPreflight: null as { directMs: number; performMs: number; upstreamRequestBytes: number } | null,
  /** Troupe's memory (after a full GC) before and after the perform rates: retention shows here. */
  performMemory: null as { before: MemorySample; after: MemorySample } | null,
  idle: null as Awaited<ReturnType<typeof runIdle>> | null, profile: null as string | null,
  troupeExits: {} as Record<string, string>, errors: [] as string[],
});
type EngineRun = ReturnType<typeof newRun>;

async function benchEngine(engine: api.Engine, nodeBinary: string, upstream: Launched, stamp: string, baseLog: Log) {
  const run = newRun(engine, nodeBinary);
  const log: Log = (line) => baseLog(`${engine} ${line}`);
  // A failed part is reported and the others still run.
  const attempt = (part: string, body: () => Promise<unknown>) => body().catch((err: unknown) => {
    run.errors.push(`${part}: ${(err as Error).message}`);
    log(`${part} failed: ${(err as Error).message}`);
  });
  const wants = (part: (typeof PARTS)[number]) => cfg.parts.includes(part);
  /** Troupe with `ulimit -n` raised and the probe with --expose-gc. */
  const options = (logLevel: string, fdLimit: number): api.TroupeOptions => ({
    engine, nodeBinary, logLevel, fdLimit, upstream: { url: `http://127.0.0.1:${upstream.port}/v1`, model: BENCH_MODEL },
    probe: { gc: true }, readyTimeoutMs: 90_000,
  });
  if (wants('fanout') || wants('perform')) {
    const profDir = cfg.cpuProf ? join(RESULTS_DIR, `cpuprof-conversations-${stamp}`, engine) : null;
    const troupe = await api.startTroupe({ ...options(cfg.logLevel, 65_536), cpuProfDir: profDir });
    const windows: Window[] = [];
    try {
      const characterId = await api.createCharacter(troupe, 'Gate Guard');
      const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
      if (wants('fanout')) {
        await attempt('fan-out', async () => {
          run.fanout = await runFanout(troupe, troupe, await api.createConversation(troupe, characterId), watch, log);
        });
      }
      if (wants('perform')) await attempt('perform', () => performLadder(troupe, characterId, upstream, run, windows, log));
    } finally {
      run.troupeExits.fanoutPerform = await troupe.stop(profDir ? 30_000 : 10_000);
    }
    const span = { start: Math.min(...windows.map((w) => w.start)), end: Math.max(...windows.map((w) => w.end)) };
    if (profDir) run.profile = await profileText(profDir, windows.length > 0 ? span : null, `${engine}, perform windows`);
  }
  if (wants('fanout-redis')) {
    await attempt('fan-out across processes', async () => {
      run.fanoutCrossProcess = await crossProcessFanout(options(cfg.logLevel, 65_536), upstream.pid, run.troupeExits, log);
    });
  }
  if (wants('sockets')) {
    const troupe = await api.startTroupe(options(cfg.socketsLogLevel, cfg.sockets + FD_SLACK));
    const holders: Holder[] = [];
    await attempt('idle sockets', async () => void (run.idle = await runIdle(troupe, holders)));
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
      `ms; Troupe LOG_LEVEL=${cfg.logLevel}${cfg.cpuProf ? ', under --cpu-prof' : ''}.`, '', markdownTable(
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
    for (const { engine, performMemory: m } of runs) {
      if (!m) continue;
      out.push(`${engine}: Troupe after a full GC: heap used ${mib(m.before.heapUsed)} MiB before the perform rates, ` +
        `${mib(m.after.heapUsed)} MiB after; RSS ${mib(m.before.rss)} → ${mib(m.after.rss)} MiB (peak ${mib(m.after.peakRss)} MiB).`);
    }
    out.push('');
  }
  out.push(...tail);
  for (const r of runs) if (r.profile) out.push('', r.profile);
  return out.join('\n');
}

runBench('bench:conversations', cfg.maxRunSec * 1000, async ({ started, stamp, log }) => {
  const git = await gitState();
  const { path: uwsPath, note: uwsNote } = await api.uwsEngineNode(cfg.engines.includes('uws'), log);
  const upstream = await startUpstream({
    BENCH_REPLY_TOKENS: String(cfg.performTokens), BENCH_REPLY_GAP_MS: String(cfg.performGapMs),
    BENCH_STAMP_TOKENS: String(cfg.fanoutChunks), BENCH_STAMP_GAP_MS: String(cfg.fanoutGapMs),
  });
  const [runs, skipped]: [EngineRun[], { engine: api.Engine; reason: string }[]] = [[], []];
  try {
    for (const engine of cfg.engines) {
      const nodeBinary = engine === 'uws' ? uwsPath : process.execPath;
      if (nodeBinary) runs.push(await benchEngine(engine, nodeBinary, upstream, stamp, log));
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
