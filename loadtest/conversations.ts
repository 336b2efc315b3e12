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
import { gitState, machine, runBench, type Launched, type Log } from './support/children.ts';
import { envDatabaseUrl, envFlag, envList, envLogLevel, envNumber, envRates, envText } from './support/env.ts';
import { performTargets, runLoad } from './support/load.ts';
import * as proc from './support/proc.ts';
import { newestProfile, summarizeSrcProfile } from './support/profile.ts';
import { RESULTS_DIR, writeResults } from './support/report.ts';
import { createCharacter, startTroupe, uwsEngineNode, type Engine, type Troupe, type TroupeOptions } from './support/troupe.ts';
import { BENCH_MODEL, expectedPerformBody, startUpstream } from './support/upstream.ts';
import { runCrossProcessFanout, runFanout } from './conversation-support/fanout.ts';
import { probeTroupe, runIdle, stopIdleClients, type IdlePlan } from './conversation-support/idle.ts';
import { compareRate, conversationsMarkdown, engineJson, gcInWindow, type EngineRun } from './conversation-support/report.ts';

const ENGINES = ['node', 'uws'] as const;
const PARTS = ['sockets', 'fanout', 'fanout-redis', 'perform'] as const;
/** Ephemeral ports left for everything else (the bench's own HTTP clients, other programs). */
const PORT_RESERVE = 2_000;
/** File descriptors asked for Troupe beyond the sockets. */
const FD_SLACK = 2_048;
/** File descriptors left free in Troupe beyond those it had open at start (upstream and client connections, logs). */
const FD_MARGIN = 64;
const PLAYER_LINE = 'Halt! Who goes there, and what business do you have at the east gate after dark?';

const sources = (envText('BENCH_SOURCE_ADDRESSES') ?? '127.0.0.1').split(',').map((s) => s.trim()).filter(Boolean);
if (sources.length === 0 || sources.some((s) => !/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(s))) {
  throw new Error(`BENCH_SOURCE_ADDRESSES must be loopback IPv4 addresses (127.x.y.z), got '${envText('BENCH_SOURCE_ADDRESSES')}'`);
}
const num = envNumber;
const cfg = {
  engines: envList('BENCH_ENGINES', ENGINES), parts: envList('BENCH_PARTS', PARTS), sockets: num('BENCH_SOCKETS', 10_000, 1),
  conversations: num('BENCH_CONVERSATIONS', 100, 1), sourceAddresses: [...new Set(sources)],
  socketsPerClient: num('BENCH_SOCKETS_PER_CLIENT', 15_000, 100),
  connectConcurrency: num('BENCH_CONNECT_CONCURRENCY', 200, 1), socketsLogLevel: envLogLevel('BENCH_SOCKETS_LOG_LEVEL', 'warn'),
  socketGoalBytes: num('BENCH_SOCKET_GOAL_BYTES', 4096, 1), fanoutSubscribers: num('BENCH_FANOUT_SUBSCRIBERS', 10, 1),
  fanoutMessages: num('BENCH_FANOUT_MESSAGES', 25, 1), fanoutWarmup: num('BENCH_FANOUT_WARMUP', 3, 0),
  fanoutChunks: num('BENCH_FANOUT_CHUNKS', 40, 1),
  fanoutGapMs: num('BENCH_FANOUT_GAP_MS', 5, 0), performRates: envRates('BENCH_PERFORM_RATES', '50,100,200,400'),
  performDurationSec: num('BENCH_PERFORM_DURATION', 10, 1, false), performWarmupSec: num('BENCH_PERFORM_WARMUP', 2, 0, false),
  performTokens: num('BENCH_PERFORM_TOKENS', 40, 1), performGapMs: num('BENCH_PERFORM_GAP_MS', 0, 0),
  performGoalMs: num('BENCH_PERFORM_GOAL_MS', 2, 0, false),
  maxP99Ms: num('BENCH_MAX_P99_MS', 100, 1, false), keepGoing: envFlag('BENCH_KEEP_GOING'),
  logLevel: envLogLevel('BENCH_LOG_LEVEL', 'info'),
  cpuProf: envFlag('BENCH_CPU_PROF'), maxRunSec: num('BENCH_MAX_RUN_SEC', 3600, 60), quietWaitSec: num('BENCH_QUIET_WAIT', 10, 0),
  quietPercent: num('BENCH_QUIET_PERCENT', 60, 1), databaseUrl: envDatabaseUrl(),
  redisUrl: envText('BENCH_REDIS_URL') ?? 'redis://127.0.0.1:6379',
};
export type Config = typeof cfg;
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** How many idle sockets fit (ports per source address, file descriptors), spread over socket-holder processes. */
function planSockets(troupeFds?: { limit: number; inUse: number }): IdlePlan {
  const ports = proc.ephemeralPortCount() ?? 28_232;
  const perSource = Math.max(0, ports - PORT_RESERVE);
  // Raising the hard limit needs CAP_SYS_RESOURCE (root alone is not enough, e.g. in containers).
  const fdMax = proc.canRaiseHardLimits() ? (proc.maxFileLimit() ?? 1_048_576) : (proc.fileLimits('self')?.hard ?? 1024);
  const addresses = cfg.sourceAddresses.join(', ');
  const caps = [
    {
      limit: perSource * cfg.sourceAddresses.length,
      reason: `ports: ${ports} ephemeral ports (net.ipv4.ip_local_port_range) less ${PORT_RESERVE} per client source address ` +
        `(${addresses}; more: BENCH_SOURCE_ADDRESSES)`,
    },
    troupeFds
      ? {
        limit: Math.max(0, troupeFds.limit - troupeFds.inUse - FD_MARGIN),
        reason: `file descriptors: Troupe got ulimit -n ${troupeFds.limit} and uses ${troupeFds.inUse} itself, ` +
          `less a margin of ${FD_MARGIN}`,
      }
      : {
        limit: Math.max(0, fdMax - FD_SLACK),
        reason: `file descriptors: at most ${fdMax} per process (fs.nr_open, or ulimit -Hn without CAP_SYS_RESOURCE), ` +
          `less ${FD_SLACK} for Troupe itself`,
      },
  ];
  const target = Math.min(cfg.sockets, ...caps.map((c) => c.limit));
  const perClient = Math.max(100, Math.min(cfg.socketsPerClient, fdMax - 1024));
  const holders: IdlePlan['holders'] = [];
  let left = target;
  for (const localAddress of cfg.sourceAddresses) {
    for (let share = Math.min(left, perSource), count = 0; share > 0; share -= count) {
      holders.push({ localAddress, count: (count = Math.min(share, perClient)) });
    }
    left -= Math.min(left, perSource);
  }
  const binding = caps.filter((c) => c.limit < cfg.sockets).sort((x, y) => x.limit - y.limit);
  const capReason = binding.length > 0 ? binding.map((c, i) => `${i === 0 ? 'limit' : 'also'}: ${c.reason} (${c.limit})`).join('; ') : null;
  return { requested: cfg.sockets, target, capReason, conversations: Math.min(cfg.conversations, target), holders };
}

/** Waits (at most BENCH_QUIET_WAIT s) for the rest of the machine to calm down before a measured phase. */
async function quiet(watch: readonly proc.WatchedProcess[], label: string, log: Log): Promise<void> {
  if (cfg.quietWaitSec <= 0) return;
  const q = await proc.waitForQuiet(cfg.quietWaitSec, cfg.quietPercent, watch);
  const waited = q.waitedSec > 1.5 ? ` after waiting ${q.waitedSec.toFixed(0)} s` : '';
  log(`${label}: rest of the machine at ${q.otherPercent?.toFixed(0) ?? '?'}% of a core${waited}`);
}

const fanoutOptions = {
  subscribers: cfg.fanoutSubscribers, messages: cfg.fanoutMessages, warmupMessages: cfg.fanoutWarmup, chunks: cfg.fanoutChunks,
  gapMs: cfg.fanoutGapMs,
  pauseMs: 50, timeoutMs: 15_000,
};

async function performLadder(troupe: Troupe, characterId: string, upstream: Launched, run: EngineRun, log: Log): Promise<void> {
  const engine = run.engine;
  const expected = Buffer.from(expectedPerformBody(cfg.performTokens));
  const { perform, direct, preflight } = await performTargets(troupe, characterId, PLAYER_LINE, upstream.port, expected);
  run.performPreflight = preflight;
  log(`${engine} perform: pre-flight ok (direct ${preflight.directMs.toFixed(1)} ms, perform ${preflight.performMs.toFixed(1)} ms; ` +
    `Troupe's upstream request is ${preflight.upstreamRequestBytes} bytes)`);
  const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
  const before = (await probeTroupe(troupe)).memory;
  const firstResult = run.perform.length;
  for (const rate of cfg.performRates) {
    await quiet(watch, `${engine} perform @ ${rate} req/s`, log);
    const [d, p] = await runLoad([direct, perform], { rate, warmupSec: cfg.performWarmupSec, durationSec: cfg.performDurationSec, watch });
    if (!d || !p) throw new Error('runLoad returned fewer results than targets');
    const r = compareRate(engine, d, p, cfg.maxP99Ms);
    run.perform.push(r);
    const [dl, pl] = [r.direct.latency, r.perform.latency];
    log(
      `${engine} perform @ ${rate} req/s: direct p50/p99 ${dl.p50.toFixed(2)}/${dl.p99.toFixed(2)} ms, ` +
        `perform ${pl.p50.toFixed(2)}/${pl.p99.toFixed(2)} ms, ` +
        `added p99 ${r.added.p99.toFixed(2)} ms, achieved ${r.direct.achievedRps.toFixed(0)}/${r.perform.achievedRps.toFixed(0)}` +
        `${r.sustained ? '' : ` (NOT sustained: ${r.verdict.join('; ')})`}`,
    );
    if (!r.sustained && !cfg.keepGoing) break;
  }
  const after = await probeTroupe(troupe);
  for (const r of run.perform.slice(firstResult)) r.gc = gcInWindow(after.gcEvents, r.monotonicUs);
  run.performMemory = { before, after: after.memory };
  log(`${engine} perform: Troupe heap used after a full GC ${mib(before.heapUsed)} MiB before the rates, ` +
    `${mib(after.memory.heapUsed)} MiB after; ` +
    `RSS ${mib(before.rss)} -> ${mib(after.memory.rss)} MiB`);
}

async function benchEngine(engine: Engine, nodeBinary: string, upstream: Launched, stamp: string, baseLog: Log): Promise<EngineRun> {
  const run: EngineRun = {
    engine, nodeBinary, fanout: null, fanoutCross: null, perform: [], performPreflight: null, performMemory: null, idle: null,
    profile: null,
    troupeExits: {}, errors: [],
  };
  const log: Log = (line) => baseLog(`${engine} ${line}`);
  // A failed part is reported and the others still run.
  const attempt = (part: string, body: () => Promise<unknown>) =>
    body().catch((err: unknown) => {
      run.errors.push(`${part}: ${(err as Error).message}`);
      log(`${part} failed: ${(err as Error).message}`);
    });
  const wants = (part: (typeof PARTS)[number]) => cfg.parts.includes(part);
  /** Troupe with `ulimit -n` raised and the probe with --expose-gc. */
  const options = (logLevel: string, fdLimit: number): TroupeOptions => ({
    engine, nodeBinary, logLevel, fdLimit, upstream: { url: `http://127.0.0.1:${upstream.port}/v1`, model: BENCH_MODEL },
    probe: { gc: true }, readyTimeoutMs: 90_000,
  });
  if (wants('fanout') || wants('perform')) {
    const profDir = cfg.cpuProf ? join(RESULTS_DIR, `cpuprof-conversations-${stamp}`, engine) : null;
    log(`starting Troupe for fan-out and perform (LOG_LEVEL=${cfg.logLevel}${profDir ? ', --cpu-prof' : ''})`);
    const troupe = await startTroupe({ ...options(cfg.logLevel, 65_536), cpuProfDir: profDir });
    try {
      const characterId = await createCharacter(troupe, 'Gate Guard');
      const watch = [{ name: 'troupe', pid: troupe.child.pid }, { name: 'upstream', pid: upstream.pid }];
      if (wants('fanout')) {
        await attempt('fan-out', async () => {
          await quiet(watch, `${engine} fan-out`, baseLog);
          run.fanout = await runFanout(troupe, characterId, { ...fanoutOptions, watch }, log);
        });
      }
      if (wants('perform')) await attempt('perform', () => performLadder(troupe, characterId, upstream, run, baseLog));
    } finally {
      run.troupeExits.fanoutPerform = await troupe.stop(profDir ? 30_000 : 10_000);
    }
    const file = profDir ? await newestProfile(profDir) : null;
    const windows = run.perform.map((r) => r.monotonicUs);
    const span = { start: Math.min(...windows.map((w) => w.start)), end: Math.max(...windows.map((w) => w.end)) };
    const window = windows.length > 0 ? span : null;
    if (file) run.profile = await summarizeSrcProfile(file, window);
    else if (profDir) log(`no .cpuprofile written in ${profDir}`);
  }
  if (wants('fanout-redis')) {
    await attempt('fan-out across processes', async () => {
      const cross = {
        troupe: options(cfg.logLevel, 65_536), databaseUrl: cfg.databaseUrl, redisUrl: cfg.redisUrl, fanout: fanoutOptions,
        upstream: { name: 'upstream', pid: upstream.pid },
        quiet: (watch: readonly proc.WatchedProcess[]) => quiet(watch, `${engine} fan-out across processes`, baseLog),
      };
      run.fanoutCross = await runCrossProcessFanout(cross, log);
      for (const [k, v] of Object.entries(run.fanoutCross.troupeExits)) run.troupeExits[`fanoutRedis${k}`] = v;
    });
  }
  if (wants('sockets')) {
    let plan = planSockets();
    if (plan.capReason) log(`idle sockets: ${plan.requested} requested, ${plan.target} possible: ${plan.capReason}`);
    log(`starting Troupe for ${plan.target} idle sockets (LOG_LEVEL=${cfg.socketsLogLevel}, ulimit -n ${plan.target + FD_SLACK})`);
    const troupe = await startTroupe(options(cfg.socketsLogLevel, plan.target + FD_SLACK));
    await attempt('idle sockets', async () => {
      // What Troupe actually got decides: the wrapper falls back to the hard limit when raising fails.
      const inUse = proc.openFileCount(troupe.child.pid);
      const fdLimit = proc.fileLimits(troupe.child.pid)?.soft;
      if (fdLimit !== undefined && inUse !== null) {
        plan = planSockets({ limit: fdLimit, inUse });
        if (plan.capReason) log(`idle sockets: with Troupe's ulimit -n ${fdLimit}: ${plan.target} sockets; ${plan.capReason}`);
      }
      const characterId = await createCharacter(troupe, 'Innkeeper');
      const idleOptions = { concurrency: cfg.connectConcurrency, connectTimeoutMs: 30_000, settleMs: 3_000, warmupSockets: 500 };
      run.idle = await runIdle(troupe, characterId, plan, idleOptions, log);
    });
    // Troupe first: it closes the sockets from its side, so the clients' ports are not left in TIME_WAIT.
    run.troupeExits.sockets = await troupe.stop(30_000);
    await stopIdleClients();
  }
  return run;
}

runBench('bench:conversations', cfg.maxRunSec * 1000, async ({ started, stamp, log }) => {
  const git = await gitState();
  const { path: uwsPath, note: uwsNote } = await uwsEngineNode(cfg.engines.includes('uws'), log);
  const upstream = await startUpstream({
    BENCH_REPLY_TOKENS: String(cfg.performTokens), BENCH_REPLY_GAP_MS: String(cfg.performGapMs),
    BENCH_STAMP_TOKENS: String(cfg.fanoutChunks), BENCH_STAMP_GAP_MS: String(cfg.fanoutGapMs),
  });
  log(`upstream on 127.0.0.1:${upstream.port}`);
  const runs: EngineRun[] = [];
  const skipped: { engine: Engine; reason: string }[] = [];
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
  const context = {
    ...machine(), totalMemMiB: Math.round(totalmem() / 2 ** 20), uwsNode: uwsNote, benchFdLimit: proc.fileLimits('self')?.soft ?? null,
    ephemeralPorts: proc.ephemeralPortCount(), git, elapsedSec,
  };
  const changes = git.dirtySrc.length > 0 ? ` with uncommitted changes in ${git.dirtySrc.join(', ')}` : '';
  const head = `Machine: ${context.cpus} CPUs (${context.cpuModel}), ${context.totalMemMiB} MiB; Node ${process.version}; ` +
    `Troupe ${git.head}` +
    `${changes}. Everything (clients, upstream, Troupe) on this machine, 127.0.0.1.`;
  const tail = [
    ...skipped.map((s) => `${s.engine}: skipped, ${s.reason}`),
    ...runs.flatMap((r) => r.errors.map((e) => `${r.engine}: ERROR ${e}`)),
    `Total run time: ${elapsedSec.toFixed(1)} s.`,
  ];
  const markdown = conversationsMarkdown(cfg, runs, head, tail);
  process.stdout.write(`${markdown}\n`);
  const paths = await writeResults('conversations', stamp, { context, config: cfg, skipped, engines: runs.map(engineJson) }, markdown);
  process.stdout.write(`\nResults written to ${paths.json} and ${paths.markdown}\n`);
  if (runs.some((r) => r.errors.length > 0)) process.exitCode = 1;
});
