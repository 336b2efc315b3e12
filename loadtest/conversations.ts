/**
 * `npm run bench:conversations`, per HTTP engine (node; uws when a Node here can load uWebSockets.js):
 *   (a) sockets       N idle conversation WebSockets on one Troupe (clients in socket-holder processes):
 *                     Troupe's RSS and V8 heap after a full GC before and after, per socket.
 *   (b) fanout        chunks stamped by the upstream (CLOCK_MONOTONIC µs) fanned out to subscribers of
 *                     one conversation: spread first..last subscriber and latency from the upstream write.
 *   (b') fanout-redis the same with the actor on Troupe A and the subscribers on B (PostgreSQL + Redis).
 *   (c) perform       open-loop POST /perform interleaved with the very upstream request Troupe made,
 *                     replayed directly: the difference is Troupe's added latency.
 * Writes loadtest/results/conversations-<stamp>.{json,md}. Environment (defaults in brackets):
 *   BENCH_ENGINES [node,uws]  BENCH_PARTS [sockets,fanout,fanout-redis,perform]
 *   BENCH_DATABASE_URL [postgres://postgres@127.0.0.1:5432/test]  BENCH_REDIS_URL [redis://127.0.0.1:6379]
 *   BENCH_SOCKETS [10000] (capped by ephemeral ports per source address and file descriptors)
 *   BENCH_CONVERSATIONS [100]  BENCH_SOURCE_ADDRESSES [127.0.0.1] (more loopback addresses lift the port cap)
 *   BENCH_SOCKETS_PER_CLIENT [15000]  BENCH_CONNECT_CONCURRENCY [200]  BENCH_SOCKETS_LOG_LEVEL [warn]
 *   BENCH_SOCKET_GOAL_BYTES [4096]  BENCH_FANOUT_SUBSCRIBERS [10]  BENCH_FANOUT_MESSAGES [25]
 *   BENCH_FANOUT_WARMUP [3]  BENCH_FANOUT_CHUNKS [40]  BENCH_FANOUT_GAP_MS [5]
 *   BENCH_PERFORM_RATES [50,100,200,400]  BENCH_PERFORM_DURATION s [10]  BENCH_PERFORM_WARMUP s [2]
 *   BENCH_PERFORM_TOKENS [40]  BENCH_PERFORM_GAP_MS [0: one burst]  BENCH_PERFORM_GOAL_MS [2]
 *   BENCH_MAX_P99_MS [100] (above: not sustained)  BENCH_KEEP_GOING (1: every rate)  BENCH_LOG_LEVEL [info]
 *   BENCH_CPU_PROF (1: Troupe of b+c under --cpu-prof, top frames over the perform windows)
 *   BENCH_QUIET_WAIT s [10] / BENCH_QUIET_PERCENT [60]: wait for the rest of the machine before a phase
 *   BENCH_MAX_RUN_SEC [3600]  UWS_NODE (else `bash .ci/uws-node.sh`)
 */
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { gitState, killAllChildren, machine, startRun, type Launched } from './support/children.ts';
import { envFlag, envList, envLogLevel, envNumber, envRates, envText } from './support/env.ts';
import { performTargets, runLoad } from './support/load.ts';
import { canRaiseHardLimits, ephemeralPortCount, fileLimits, maxFileLimit, openFileCount, waitForQuiet, type WatchedProcess } from './support/proc.ts';
import { formatSrcProfile, newestProfile, summarizeSrcProfile, type SrcProfile } from './support/profile.ts';
import { RESULTS_DIR, writeResults } from './support/report.ts';
import { createCharacter, ROOT, startTroupe, uwsEngineNode, type Engine, type Troupe, type TroupeOptions } from './support/troupe.ts';
import { BENCH_MODEL, expectedPerformBody, startUpstream } from './support/upstream-reply.ts';
import { runCrossProcessFanout, runFanout, type CrossResult, type FanoutResult } from './conversation-support/fanout.ts';
import { probeTroupe, runIdle, stopIdleClients, type IdlePlan, type IdleResult, type MemorySample } from './conversation-support/idle.ts';
import { compareRate, fanoutJson, fanoutTable, gcInWindow, idleTable, performTable, rateJson, type RateResult } from './conversation-support/report.ts';

const ENGINES = ['node', 'uws'] as const;
const PARTS = ['sockets', 'fanout', 'fanout-redis', 'perform'] as const;
type Part = (typeof PARTS)[number];
/** Ephemeral ports left for everything else (the bench's own HTTP clients, other programs). */
const PORT_RESERVE = 2_000;
/** File descriptors asked for Troupe beyond the sockets. */
const FD_SLACK = 2_048;
/** File descriptors left free in Troupe beyond those it had open at start (upstream and client connections, logs). */
const FD_MARGIN = 64;
const PLAYER_LINE = 'Halt! Who goes there, and what business do you have at the east gate after dark?';

function readConfig() {
  const num = envNumber;
  const sources = (envText('BENCH_SOURCE_ADDRESSES') ?? '127.0.0.1').split(',').map((s) => s.trim()).filter(Boolean);
  const bad = sources.filter((s) => !/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(s));
  if (bad.length > 0 || sources.length === 0) throw new Error(`BENCH_SOURCE_ADDRESSES must be loopback IPv4 addresses (127.x.y.z), got '${envText('BENCH_SOURCE_ADDRESSES')}'`);
  const [list, level, flag] = [envList, envLogLevel, envFlag];
  return {
    engines: list('BENCH_ENGINES', ENGINES), parts: list('BENCH_PARTS', PARTS), sockets: num('BENCH_SOCKETS', 10_000, 1),
    conversations: num('BENCH_CONVERSATIONS', 100, 1), sourceAddresses: [...new Set(sources)], socketsPerClient: num('BENCH_SOCKETS_PER_CLIENT', 15_000, 100),
    connectConcurrency: num('BENCH_CONNECT_CONCURRENCY', 200, 1), socketsLogLevel: level('BENCH_SOCKETS_LOG_LEVEL', 'warn'), socketGoalBytes: num('BENCH_SOCKET_GOAL_BYTES', 4096, 1),
    fanoutSubscribers: num('BENCH_FANOUT_SUBSCRIBERS', 10, 1), fanoutMessages: num('BENCH_FANOUT_MESSAGES', 25, 1), fanoutWarmup: num('BENCH_FANOUT_WARMUP', 3, 0),
    fanoutChunks: num('BENCH_FANOUT_CHUNKS', 40, 1), fanoutGapMs: num('BENCH_FANOUT_GAP_MS', 5, 0), performRates: envRates('BENCH_PERFORM_RATES', '50,100,200,400'),
    performDurationSec: num('BENCH_PERFORM_DURATION', 10, 1, false), performWarmupSec: num('BENCH_PERFORM_WARMUP', 2, 0, false), performTokens: num('BENCH_PERFORM_TOKENS', 40, 1),
    performGapMs: num('BENCH_PERFORM_GAP_MS', 0, 0), performGoalMs: num('BENCH_PERFORM_GOAL_MS', 2, 0, false), maxP99Ms: num('BENCH_MAX_P99_MS', 100, 1, false),
    keepGoing: flag('BENCH_KEEP_GOING'), logLevel: level('BENCH_LOG_LEVEL', 'info'), cpuProf: flag('BENCH_CPU_PROF'),
    maxRunSec: num('BENCH_MAX_RUN_SEC', 3600, 60), quietWaitSec: num('BENCH_QUIET_WAIT', 10, 0),
    quietPercent: num('BENCH_QUIET_PERCENT', 60, 1), databaseUrl: envText('BENCH_DATABASE_URL') ?? 'postgres://postgres@127.0.0.1:5432/test', redisUrl: envText('BENCH_REDIS_URL') ?? 'redis://127.0.0.1:6379',
  };
}

type Config = ReturnType<typeof readConfig>;
const log = (line: string) => process.stderr.write(`[bench:conversations ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

/** How many idle sockets fit (ports per source address, file descriptors), spread over socket-holder processes. */
function planSockets(cfg: Config, troupeFds?: { limit: number; inUse: number }): IdlePlan {
  const ports = ephemeralPortCount() ?? 28_232;
  const perSource = Math.max(0, ports - PORT_RESERVE);
  // Raising the hard limit needs CAP_SYS_RESOURCE (root alone is not enough, e.g. in containers).
  const fdMax = canRaiseHardLimits() ? (maxFileLimit() ?? 1_048_576) : (fileLimits('self')?.hard ?? 1024);
  const caps = [
    { limit: perSource * cfg.sourceAddresses.length, reason: `ports: ${ports} ephemeral ports (net.ipv4.ip_local_port_range) less ${PORT_RESERVE} per client source address (${cfg.sourceAddresses.join(', ')}; more: BENCH_SOURCE_ADDRESSES)` },
    troupeFds
      ? { limit: Math.max(0, troupeFds.limit - troupeFds.inUse - FD_MARGIN), reason: `file descriptors: Troupe got ulimit -n ${troupeFds.limit} and uses ${troupeFds.inUse} itself, less a margin of ${FD_MARGIN}` }
      : { limit: Math.max(0, fdMax - FD_SLACK), reason: `file descriptors: at most ${fdMax} per process (fs.nr_open, or ulimit -Hn without CAP_SYS_RESOURCE), less ${FD_SLACK} for Troupe itself` },
  ];
  const target = Math.min(cfg.sockets, ...caps.map((c) => c.limit));
  const perClient = Math.max(100, Math.min(cfg.socketsPerClient, fdMax - 1024));
  const holders: IdlePlan['holders'] = [];
  let left = target;
  for (const localAddress of cfg.sourceAddresses) {
    for (let share = Math.min(left, perSource), count = 0; share > 0; share -= count) holders.push({ localAddress, count: (count = Math.min(share, perClient)) });
    left -= Math.min(left, perSource);
  }
  const binding = caps.filter((c) => c.limit < cfg.sockets).sort((x, y) => x.limit - y.limit);
  const capReason = binding.length > 0 ? binding.map((c, i) => `${i === 0 ? 'limit' : 'also'}: ${c.reason} (${c.limit})`).join('; ') : null;
  return { requested: cfg.sockets, target, capReason, conversations: Math.min(cfg.conversations, target), holders };
}

/** Waits (at most BENCH_QUIET_WAIT s) for the rest of the machine to calm down before a measured phase. */
async function quiet(cfg: Config, watch: readonly WatchedProcess[], label: string): Promise<void> {
  if (cfg.quietWaitSec <= 0) return;
  const q = await waitForQuiet(cfg.quietWaitSec, cfg.quietPercent, watch);
  const other = q.otherPercent === null ? '?' : q.otherPercent.toFixed(0);
  log(`${label}: rest of the machine at ${other}% of a core${q.waitedSec > 1.5 ? ` after waiting ${q.waitedSec.toFixed(0)} s` : ''}`);
}

const fanoutOptions = (cfg: Config) => ({ subscribers: cfg.fanoutSubscribers, messages: cfg.fanoutMessages, warmupMessages: cfg.fanoutWarmup, chunks: cfg.fanoutChunks, gapMs: cfg.fanoutGapMs, pauseMs: 50, timeoutMs: 15_000 });

/** Troupe for (b) and (c) or for (a): `ulimit -n` raised, the probe with --expose-gc, optionally --cpu-prof. */
function troupeOptions(engine: Engine, nodeBinary: string, upstreamUrl: string, logLevel: string, fdLimit: number, profDir: string | null): TroupeOptions {
  const nodeArgs = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  return { engine, nodeBinary, logLevel, fdLimit, upstream: { url: upstreamUrl, model: BENCH_MODEL }, probe: { gc: true }, nodeArgs, readyTimeoutMs: 90_000 };
}

interface EngineRun {
  engine: Engine;
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

async function performLadder(cfg: Config, troupe: Troupe, characterId: string, upstream: Launched, run: EngineRun): Promise<void> {
  const engine = run.engine;
  const { perform, direct, preflight } = await performTargets(troupe, characterId, PLAYER_LINE, upstream.port, Buffer.from(expectedPerformBody(cfg.performTokens)));
  run.performPreflight = preflight;
  log(`${engine} perform: pre-flight ok (direct ${preflight.directMs.toFixed(1)} ms, perform ${preflight.performMs.toFixed(1)} ms; Troupe's upstream request is ${preflight.upstreamRequestBytes} bytes)`);

  const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
  const memoryBefore = (await probeTroupe(troupe)).memory;
  const firstResult = run.perform.length;
  for (const rate of cfg.performRates) {
    await quiet(cfg, watch, `${engine} perform @ ${rate} req/s`);
    const [d, p] = await runLoad([direct, perform], { rate, warmupSec: cfg.performWarmupSec, durationSec: cfg.performDurationSec, watch });
    if (!d || !p) throw new Error('runLoad returned fewer results than targets');
    const result = compareRate(engine, d, p, cfg.maxP99Ms);
    run.perform.push(result);
    log(
      `${engine} perform @ ${rate} req/s: direct p50/p99 ${result.direct.latency.p50.toFixed(2)}/${result.direct.latency.p99.toFixed(2)} ms, ` +
        `perform ${result.perform.latency.p50.toFixed(2)}/${result.perform.latency.p99.toFixed(2)} ms, added p99 ${result.added.p99.toFixed(2)} ms, ` +
        `achieved ${result.direct.achievedRps.toFixed(0)}/${result.perform.achievedRps.toFixed(0)}${result.sustained ? '' : ` (NOT sustained: ${result.verdict.join('; ')})`}`,
    );
    if (!result.sustained && !cfg.keepGoing) break;
  }
  const after = await probeTroupe(troupe);
  for (const r of run.perform.slice(firstResult)) r.gc = gcInWindow(after.gcEvents, r.monotonicUs);
  run.performMemory = { before: memoryBefore, after: after.memory };
  log(
    `${engine} perform: Troupe heap used after a full GC ${(memoryBefore.heapUsed / 2 ** 20).toFixed(1)} MiB before the rates, ` +
      `${(after.memory.heapUsed / 2 ** 20).toFixed(1)} MiB after; RSS ${(memoryBefore.rss / 2 ** 20).toFixed(1)} -> ${(after.memory.rss / 2 ** 20).toFixed(1)} MiB`,
  );
}

async function benchEngine(cfg: Config, engine: Engine, nodeBinary: string, upstream: Launched, stamp: string): Promise<EngineRun> {
  const run: EngineRun = { engine, nodeBinary, fanout: null, fanoutCross: null, perform: [], performPreflight: null, performMemory: null, idle: null, profile: null, troupeExits: {}, errors: [] };
  // A failed part is reported and the others still run.
  const attempt = (part: string, body: () => Promise<unknown>) =>
    body().catch((err: unknown) => (run.errors.push(`${part}: ${(err as Error).message}`), log(`${engine}: ${part} failed: ${(err as Error).message}`)));
  const upstreamUrl = `http://127.0.0.1:${upstream.port}/v1`;
  const wants = (part: Part) => cfg.parts.includes(part);

  if (wants('fanout') || wants('perform')) {
    const profDir = cfg.cpuProf ? join(RESULTS_DIR, `cpuprof-conversations-${stamp}`, engine) : null;
    log(`${engine}: starting Troupe for fan-out and perform (LOG_LEVEL=${cfg.logLevel}${profDir ? ', --cpu-prof' : ''})`);
    const troupe = await startTroupe(troupeOptions(engine, nodeBinary, upstreamUrl, cfg.logLevel, 65_536, profDir));
    try {
      const characterId = await createCharacter(troupe, 'Gate Guard');
      const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
      if (wants('fanout')) {
        await attempt('fan-out', async () => {
          await quiet(cfg, watch, `${engine} fan-out`);
          run.fanout = await runFanout(troupe, characterId, { ...fanoutOptions(cfg), watch }, (line) => log(`${engine} ${line}`));
        });
      }
      if (wants('perform')) await attempt('perform', () => performLadder(cfg, troupe, characterId, upstream, run));
    } finally {
      run.troupeExits.fanoutPerform = await troupe.stop(profDir ? 30_000 : 10_000);
    }
    if (profDir) {
      const file = await newestProfile(profDir);
      const windows = run.perform.map((r) => r.monotonicUs);
      const window = windows.length > 0 ? { start: Math.min(...windows.map((w) => w.start)), end: Math.max(...windows.map((w) => w.end)) } : null;
      if (file) run.profile = await summarizeSrcProfile(file, window);
      else log(`${engine}: no .cpuprofile written in ${profDir}`);
    }
  }

  if (wants('fanout-redis')) {
    await attempt('fan-out across processes', async () => {
      const cross = {
        troupe: troupeOptions(engine, nodeBinary, upstreamUrl, cfg.logLevel, 65_536, null), databaseUrl: cfg.databaseUrl, redisUrl: cfg.redisUrl, fanout: fanoutOptions(cfg),
        upstream: { name: 'upstream', pid: upstream.pid }, quiet: (watch: readonly WatchedProcess[]) => quiet(cfg, watch, `${engine} fan-out across processes`),
      };
      run.fanoutCross = await runCrossProcessFanout(cross, (line) => log(`${engine} ${line}`));
      Object.assign(run.troupeExits, Object.fromEntries(Object.entries(run.fanoutCross.troupeExits).map(([k, v]) => [`fanoutRedis${k}`, v])));
    });
  }

  if (wants('sockets')) {
    let plan = planSockets(cfg);
    if (plan.capReason) log(`${engine} idle sockets: ${plan.requested} requested, ${plan.target} possible: ${plan.capReason}`);
    log(`${engine}: starting Troupe for ${plan.target} idle sockets (LOG_LEVEL=${cfg.socketsLogLevel}, ulimit -n ${plan.target + FD_SLACK})`);
    const troupe = await startTroupe(troupeOptions(engine, nodeBinary, upstreamUrl, cfg.socketsLogLevel, plan.target + FD_SLACK, null));
    await attempt('idle sockets', async () => {
      // What Troupe actually got decides: the wrapper falls back to the hard limit when raising fails.
      const inUse = openFileCount(troupe.child.pid);
      const fdLimit = fileLimits(troupe.child.pid)?.soft;
      if (fdLimit !== undefined && inUse !== null) {
        plan = planSockets(cfg, { limit: fdLimit, inUse });
        if (plan.capReason) log(`${engine} idle sockets: with Troupe's ulimit -n ${fdLimit}: ${plan.target} sockets; ${plan.capReason}`);
      }
      const characterId = await createCharacter(troupe, 'Innkeeper');
      const idleOptions = { concurrency: cfg.connectConcurrency, connectTimeoutMs: 30_000, settleMs: 3_000, warmupSockets: 500 };
      run.idle = await runIdle(troupe, characterId, plan, idleOptions, (line) => log(`${engine} ${line}`));
    });
    // Troupe first: it closes the sockets from its side, so the clients' ports are not left in TIME_WAIT.
    run.troupeExits.sockets = await troupe.stop(30_000);
    await stopIdleClients();
  }
  return run;
}

async function main(): Promise<void> {
  const cfg = readConfig();
  const { started, stamp, disarm } = startRun('bench:conversations', cfg.maxRunSec * 1000);

  const git = await gitState(ROOT);
  const { path: uwsPath, note: uwsNote } = await uwsEngineNode(cfg.engines.includes('uws'), log);

  const upstream = await startUpstream({ BENCH_REPLY_TOKENS: String(cfg.performTokens), BENCH_REPLY_GAP_MS: String(cfg.performGapMs), BENCH_STAMP_TOKENS: String(cfg.fanoutChunks), BENCH_STAMP_GAP_MS: String(cfg.fanoutGapMs) });
  log(`upstream on 127.0.0.1:${upstream.port}`);

  const runs: EngineRun[] = [];
  const skipped: { engine: Engine; reason: string }[] = [];
  try {
    for (const engine of cfg.engines) {
      const nodeBinary = engine === 'uws' ? uwsPath : process.execPath;
      if (!nodeBinary) {
        skipped.push({ engine, reason: uwsNote });
        continue;
      }
      runs.push(await benchEngine(cfg, engine, nodeBinary, upstream, stamp));
    }
  } finally {
    await upstream.stop(5_000);
  }
  disarm();

  const elapsedSec = (Date.now() - started) / 1000;
  const context = { ...machine(), totalMemMiB: Math.round(totalmem() / 2 ** 20), uwsNode: uwsNote, benchFdLimit: fileLimits('self')?.soft ?? null, ephemeralPorts: ephemeralPortCount(), git, elapsedSec };
  const out: string[] = ['', `## Conversations benchmark (${new Date().toISOString()})`, ''];
  out.push(
    `Machine: ${context.cpus} CPUs (${context.cpuModel}), ${context.totalMemMiB} MiB; Node ${process.version}; Troupe ${git.head}` +
      `${git.dirtySrc.length > 0 ? ` with uncommitted changes in ${git.dirtySrc.join(', ')}` : ''}. Everything (clients, upstream, Troupe) on this machine, 127.0.0.1.`,
    '',
  );
  const idleRows = runs.flatMap((r) => (r.idle ? [{ engine: r.engine, result: r.idle }] : []));
  if (idleRows.length > 0) {
    const first = idleRows[0]?.result;
    out.push(
      `### (a) Idle conversation WebSockets on one Troupe process`,
      '',
      `Troupe LOG_LEVEL=${cfg.socketsLogLevel} for this part; VmRSS and V8 heap sampled after a full GC (--expose-gc, via the heap probe), from ${3} s after connecting ` +
        'every 2 s until RSS and the V8 heap size hold steady (within 2 MiB twice in a row): ' +
        `before, with half the sockets and with all; per socket = (after - before) / sockets open; "2nd half" = (after - half) / sockets added in the second half, ` +
        `which leaves out one-time growth the first sockets trigger (V8 new space, allocator arenas). 1 KiB = 1024 bytes. The sockets share ${first?.plan.conversations ?? cfg.conversations} conversations ` +
        `(socket i joins conversation i mod ${first?.plan.conversations ?? cfg.conversations}); their client side lives in socket-holder processes (ws client), counted apart.`,
      '',
      idleTable(idleRows, cfg.socketGoalBytes),
      '',
      ...idleRows.flatMap(({ engine, result }) => [
        ...(result.plan.capReason ? [`${engine}: ${result.plan.requested} sockets requested, ${result.plan.target} opened at most: ${result.plan.capReason}.`] : []),
        ...Object.entries(result.errorSamples).map(([kind, sample]) => `${engine}: failure ${kind}: ${sample}`),
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
      `${cfg.fanoutMessages} messages (after ${cfg.fanoutWarmup} warm-up) posted over HTTP; the upstream streams ${cfg.fanoutChunks} chunks ${cfg.fanoutGapMs} ms apart, each stamped ` +
        'with the CLOCK_MONOTONIC µs it was written. Spread = last - first subscriber arrival per chunk; latency = arrival - upstream write, per chunk and subscriber. ' +
        'All subscribers live in the benchmark process (one thread), so the spread includes its own time to take in the messages. ' +
        '"A → Redis → B": two Troupe processes on one fresh PostgreSQL database and one Redis; the actor runs on A, where the messages are posted, ' +
        'the subscribers are connected to B, so every chunk crosses Redis pub/sub; CPU is A + B. Times in ms.',
      '',
      fanoutTable(fanRows),
      '',
      ...fanRows.flatMap(({ engine, result }) => result.problems.map((p) => `${engine}: ${p}`)),
      ...runs.flatMap((r) => {
        const p = r.fanoutCross?.placement;
        if (!p) return [];
        const where = p.onA === null ? 'not verified (no processId in the logs or in Redis)' : p.onA ? 'on A, as intended' : 'NOT on A';
        return [`${r.engine} across processes: Redis' room cache puts the actor on ${p.actorProcessId ?? '?'} (A ${p.aProcessId ?? '?'}, B ${p.bProcessId ?? '?'}): ${where}.`];
      }),
      '',
    );
  }
  const rateRows = runs.flatMap((r) => r.perform);
  if (rateRows.length > 0) {
    out.push(
      `### (c) POST /perform vs the upstream alone`,
      '',
      `Open loop, ${cfg.performDurationSec} s measured after ${cfg.performWarmupSec} s warm-up per rate; requests alternate between the paths (each path at the offered rate). ` +
        `direct = the same client streaming POST /v1/chat/completions from the upstream with the exact body Troupe sends for that perform; perform = POST /perform ` +
        `(Troupe streams the same reply from the upstream, then answers JSON). The reply is ${cfg.performTokens} chunks${cfg.performGapMs > 0 ? ` ${cfg.performGapMs} ms apart` : ' written in one burst'}. ` +
        `Latency = request sent to last response byte, ms. Troupe LOG_LEVEL=${cfg.logLevel}${cfg.cpuProf ? '; Troupe ran under --cpu-prof (slower)' : ''}.`,
      '',
      performTable(rateRows, cfg.performGoalMs),
      '',
    );
    for (const r of runs) {
      const sustained = r.perform.filter((x) => x.sustained);
      const best = sustained.at(-1);
      if (best) {
        const worstAdded = Math.max(...sustained.map((x) => x.added.p99));
        out.push(
          `${r.engine}: perform sustained up to ${best.rate} req/s offered (${best.perform.achievedRps.toFixed(0)} achieved) of the rates tried; ` +
            `added p99 ${worstAdded.toFixed(2)} ms at worst over the sustained rates: ${worstAdded <= cfg.performGoalMs ? 'meets' : 'MISSES'} the ≤ ${cfg.performGoalMs} ms goal.`,
        );
      }
    }
    for (const r of runs) {
      const m = r.performMemory;
      if (!m) continue;
      const mb = (b: number) => (b / 2 ** 20).toFixed(1);
      out.push(
        `${r.engine}: Troupe after a full GC: heap used ${mb(m.before.heapUsed)} MiB before the perform rates, ${mb(m.after.heapUsed)} MiB after; ` +
          `RSS ${mb(m.before.rss)} → ${mb(m.after.rss)} MiB (peak ${mb(m.after.peakRss)} MiB).`,
      );
    }
    out.push('');
  }
  out.push(
    ...skipped.map((s) => `${s.engine}: skipped, ${s.reason}`),
    ...runs.flatMap((r) => r.errors.map((e) => `${r.engine}: ERROR ${e}`)),
    `Total run time: ${elapsedSec.toFixed(1)} s.`,
  );
  for (const r of runs) if (r.profile) out.push('', formatSrcProfile(r.profile, `${r.engine}, perform windows`));
  process.stdout.write(`${out.join('\n')}\n`);
  const engines = runs.map(({ fanout, fanoutCross, perform, ...r }) => ({
    ...r, fanout: fanout ? fanoutJson(fanout) : null, fanoutCrossProcess: fanoutCross ? { ...fanoutCross, fanout: fanoutJson(fanoutCross.fanout) } : null, perform: perform.map(rateJson),
  }));
  const json = { context, config: cfg, skipped, engines };
  const paths = await writeResults('conversations', stamp, json, out.join('\n'));
  process.stdout.write(`\nResults written to ${paths.json} and ${paths.markdown}\n`);
  if (runs.some((r) => r.errors.length > 0)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`\n[bench:conversations] failed: ${(err as Error)?.stack ?? String(err)}\n`);
  killAllChildren();
  process.exit(1);
});
