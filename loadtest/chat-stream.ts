/**
 * Streaming chat benchmark: `npm run bench:chat`.
 *
 * What Troupe adds to a streamed chat completion. One load generator (node:http, keep-alive,
 * open loop: request i starts at i / rate whatever happened before) streams the same completion
 * (a) from a benchmark upstream directly and (b) through Troupe's POST /v1/chat/completions
 * with a character as `model`, at a ladder of fixed rates, for each HTTP engine. Per request
 * it records the time to the first chunk (TTFC) and the total time; per rate it reports the
 * p50/p99 of both paths and the difference (via Troupe minus direct), the achieved req/s and
 * the errors. The ladder of an engine stops at the first rate that is not sustained.
 *
 * The client is node:http with a keep-alive Agent (see chat-support/open-loop.ts for why), the
 * upstream a lean OpenAI-compatible server with a fixed reply (chat-support/upstream-server.ts).
 * Each request carries a fixed-width tag in `user`, which Troupe passes on, so the upstream's own
 * timestamps split every request into legs: client -> upstream (Troupe's request handling and its
 * upstream call) and upstream -> client (Troupe relaying chunks).
 *
 * Processes, all on 127.0.0.1: this one (the load generator), the benchmark upstream
 * (loadtest/chat-support/upstream-server.ts) and one Troupe at a time. All are children of this
 * process and are killed when it ends, however it ends. Prints markdown tables and writes the
 * raw numbers to loadtest/results/chat-stream-<timestamp>.json.
 *
 * Two ways to pair the paths (BENCH_MODE):
 *   interleaved (default)  direct and via-Troupe requests alternate in one schedule, each path at
 *                          the offered rate (so the client and upstream carry twice that). Both
 *                          paths live through the same moments of the machine, so other work on a
 *                          shared machine skews them alike, and the direct baseline pays the same
 *                          CPU contention Troupe causes: the difference is Troupe's own path.
 *   sequential             the direct run at the rate, then the via-Troupe run at the rate, alone.
 *                          The difference then also holds the CPU Troupe takes from the client and
 *                          the upstream on this machine, and whatever else ran in either window.
 *
 * Environment:
 *   BENCH_MODE               interleaved (default) or sequential, see above
 *   BENCH_RATES              offered req/s ladder (default 25,50,100,150,200,300,400,600,800)
 *   BENCH_DURATION           measured seconds per rate and path (default 5)
 *   BENCH_WARMUP             seconds of the same load before each measured window (default 1)
 *   BENCH_ENGINES            node,uws (default both; uws is skipped with a note if no Node here can load it)
 *   BENCH_TOKENS             content chunks per reply (default 40)
 *   BENCH_CHUNK_DELAY_MS     gap between the upstream's chunks (default 5; 0 = all in one tick)
 *   BENCH_FIRST_CHUNK_DELAY_MS  upstream delay before the first chunk (default 0)
 *   BENCH_TROUPE_MODEL       character (default: a character id, system prompt added) or upstream (proxy as is)
 *   BENCH_LOG_LEVEL          Troupe's LOG_LEVEL (default info: what production runs)
 *   BENCH_REQUEST_TIMEOUT_MS per-request limit (default 10000)
 *   BENCH_MAX_SOCKETS        client sockets per target (default 4096)
 *   BENCH_VALIDATE_EVERY     parse every n-th response in full (default 25; 0 = never)
 *   BENCH_MAX_TTFC_P99_MS    a rate whose TTFC p99 exceeds this (ms) is not sustained (default 100)
 *   BENCH_KEEP_GOING         1: run the whole ladder even after a rate fails
 *   BENCH_QUIET_WAIT         before each measured phase, wait up to this many seconds for the rest of the
 *                            machine to use < BENCH_QUIET_PERCENT (default 60) % of a core (default 10; 0 = don't wait)
 *   BENCH_CPU_PROF           1: run Troupe with --cpu-prof and print its top frames (slows it down)
 *   UWS_NODE                 Node binary that can load uWebSockets.js; else `bash .ci/uws-node.sh`
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compare, DEFAULT_MAX_TTFC_P99_MS, rateJson, summarizePhase, type PhaseSummary, type RateResult } from './chat-support/analysis.ts';
import { waitForQuiet } from './support/cpu-meter.ts';
import { probe, runPhase, type PhaseOptions, type StreamTarget } from './chat-support/open-loop.ts';
import { freePort, launchPolled } from './support/polled-child.ts';
import { formatSrcProfile, summarizeSrcProfile, type SrcProfile } from './support/profile-src.ts';
import { BENCH_MODEL, expectedEvents, parseSse, replyText, TIMINGS_PATH, UPSTREAM_READY_MSG, type UpstreamTiming } from './chat-support/reply.ts';
import { addedTable, headline, LEGEND, LEGS_LEGEND, legsTable, noiseNotes, phaseTable } from './chat-support/report.ts';
import { killAllChildren, launch, type Launched } from './support/children.ts';
import { sampleBackgroundPercent } from './support/cpu.ts';
import { envFlag, envList, envLogLevel, envNumber, envRates, envText } from './support/env.ts';
import { launchUpstream } from './support/fake-upstream.ts';
import { newestProfile } from './support/profile.ts';
import { troupeEnv } from './support/troupe-env.ts';
import { gitState, machine, startRun, uwsEngineNode } from './support/run.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const ENGINES = ['node', 'uws'] as const;
type Engine = (typeof ENGINES)[number];

const UWS_SCRIPT_TIMEOUT_MS = 10 * 60_000;
const READY_TIMEOUT_MS = 90_000;
const HTTP_TIMEOUT_MS = 10_000;
/** What the client asks: the same messages for both paths. */
const MESSAGES = [{ role: 'user', content: 'The fog is thick tonight. Which ships came in, and did any of them fly a black flag?' }];

interface BenchConfig {
  mode: 'interleaved' | 'sequential';
  rates: number[];
  durationSec: number;
  warmupSec: number;
  engines: Engine[];
  tokens: number;
  chunkDelayMs: number;
  firstChunkDelayMs: number;
  troupeModel: 'character' | 'upstream';
  logLevel: string;
  requestTimeoutMs: number;
  maxSockets: number;
  validateEvery: number;
  keepGoing: boolean;
  cpuProf: boolean;
  maxTtfcP99Ms: number;
  quietWaitSec: number;
  quietPercent: number;
}

function readConfig(): BenchConfig {
  const env = envText;
  const num = (name: string, fallback: number, min: number, integer = false) => envNumber(name, fallback, min, integer);
  const flag = envFlag;
  const troupeModel = env('BENCH_TROUPE_MODEL') ?? 'character';
  if (troupeModel !== 'character' && troupeModel !== 'upstream') throw new Error(`BENCH_TROUPE_MODEL must be character or upstream, got '${troupeModel}'`);
  const mode = env('BENCH_MODE') ?? 'interleaved';
  if (mode !== 'interleaved' && mode !== 'sequential') throw new Error(`BENCH_MODE must be interleaved or sequential, got '${mode}'`);
  const logLevel = envLogLevel('BENCH_LOG_LEVEL', 'info');
  return {
    mode,
    rates: envRates('BENCH_RATES', '25,50,100,150,200,300,400,600,800'),
    durationSec: num('BENCH_DURATION', 5, 1),
    warmupSec: num('BENCH_WARMUP', 1, 0),
    engines: envList('BENCH_ENGINES', ENGINES),
    tokens: num('BENCH_TOKENS', 40, 1, true),
    chunkDelayMs: num('BENCH_CHUNK_DELAY_MS', 5, 0, true),
    firstChunkDelayMs: num('BENCH_FIRST_CHUNK_DELAY_MS', 0, 0, true),
    troupeModel,
    logLevel,
    requestTimeoutMs: num('BENCH_REQUEST_TIMEOUT_MS', 10_000, 100, true),
    maxSockets: num('BENCH_MAX_SOCKETS', 4096, 1, true),
    validateEvery: num('BENCH_VALIDATE_EVERY', 25, 0, true),
    keepGoing: flag('BENCH_KEEP_GOING'),
    cpuProf: flag('BENCH_CPU_PROF'),
    maxTtfcP99Ms: num('BENCH_MAX_TTFC_P99_MS', DEFAULT_MAX_TTFC_P99_MS, 0),
    quietWaitSec: num('BENCH_QUIET_WAIT', 10, 0),
    quietPercent: num('BENCH_QUIET_PERCENT', 60, 1),
  };
}

const log = (line: string) => process.stderr.write(`[bench:chat] ${line}\n`);

async function fetchJson(url: string, init: RequestInit, expected: number): Promise<unknown> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${init.method ?? 'GET'} ${url}: expected ${expected}, got ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as unknown;
}

function streamTarget(label: string, port: number, model: string, authorization: string): StreamTarget {
  // The tag goes into `user` (passed on by Troupe); everything else is the same for every request.
  const marker = '@@TAG@@';
  const [head, tail] = JSON.stringify({ model, messages: MESSAGES, stream: true, stream_options: { include_usage: true }, user: marker }).split(marker);
  const before = Buffer.from(head ?? '');
  const after = Buffer.from(tail ?? '');
  return {
    label,
    port,
    path: '/v1/chat/completions',
    headers: { authorization, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: (tag) => Buffer.concat([before, Buffer.from(tag), after]),
  };
}

/** What the upstream recorded for the tagged requests since the last call (it forgets them). */
async function upstreamTimings(port: number): Promise<Map<string, UpstreamTiming>> {
  const got = (await fetchJson(`http://127.0.0.1:${port}${TIMINGS_PATH}`, {}, 200)) as Record<string, UpstreamTiming>;
  return new Map(Object.entries(got));
}

/** One request parsed in full: both paths must answer 200 with exactly the reply we expect. */
async function preflight(target: StreamTarget, cfg: BenchConfig): Promise<{ ttfcMs: number; totalMs: number }> {
  const got = await probe(target, HTTP_TIMEOUT_MS);
  if (got.status !== 200) throw new Error(`${target.label}: pre-flight answered ${got.status}: ${got.body.slice(0, 300)}`);
  const parsed = parseSse(got.body);
  const wantEvents = expectedEvents(cfg.tokens);
  const problems = [
    parsed.problem,
    parsed.text === replyText(cfg.tokens) ? null : `text ${JSON.stringify(parsed.text.slice(0, 80))}`,
    parsed.events === wantEvents ? null : `${parsed.events} events, expected ${wantEvents}`,
    parsed.done ? null : 'no [DONE]',
    parsed.usage ? null : 'no usage chunk',
  ].filter((p) => p !== null);
  if (problems.length > 0) throw new Error(`${target.label}: pre-flight stream is not the expected reply: ${problems.join('; ')}\n${got.body.slice(0, 600)}`);
  return { ttfcMs: got.ttfcMs, totalMs: got.totalMs };
}

interface EngineRun {
  engine: Engine;
  nodeBinary: string;
  results: RateResult[];
  preflight: Record<string, { ttfcMs: number; totalMs: number }>;
  profile: SrcProfile | null;
  troupeExit: string | null;
  /** Set when Troupe exited on its own in the middle of the ladder. */
  troupeDied: string | null;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startTroupe(cfg: BenchConfig, engine: Engine, nodeBinary: string, upstreamUrl: string, profDir: string): Promise<{ child: Launched; key: string }> {
  const key = `sk-troupe-bench${randomBytes(12).toString('base64url')}`;
  const env = troupeEnv({
    PORT: '0',
    HOST: '127.0.0.1',
    HTTP_ENGINE: engine,
    TROUPE_DATA_DIR: 'memory://',
    TROUPE_BOOTSTRAP_KEY: key,
    LOG_LEVEL: cfg.logLevel,
    INFERENCE_BASE_URL: upstreamUrl,
    INFERENCE_MODEL: BENCH_MODEL,
    INFERENCE_MAX_RETRIES: '0',
  });
  const nodeArgs = cfg.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  log(`troupe-${engine}: starting src/main.ts with ${nodeBinary}${cfg.cpuProf ? ' under --cpu-prof' : ''}`);
  const spec = { name: `troupe-${engine}`, command: nodeBinary, args: [...nodeArgs, 'src/main.ts'], env, cwd: ROOT, readyTimeoutMs: READY_TIMEOUT_MS };
  // Below info Troupe does not log the line with its port: pick the port and poll /healthz instead.
  const logsReadyLine = ['info', 'debug', 'trace'].includes(cfg.logLevel);
  let child: Launched;
  if (logsReadyLine) {
    child = await launch({ ...spec, readyMsg: 'troupe listening' });
  } else {
    const port = await freePort();
    env.PORT = String(port);
    child = await launchPolled({ ...spec, port });
  }
  if (child.readyInfo.engine !== engine) {
    await child.stop(5_000);
    throw new Error(`troupe-${engine}: Troupe reports engine '${String(child.readyInfo.engine)}'`);
  }
  return { child, key };
}

async function benchEngine(cfg: BenchConfig, engine: Engine, nodeBinary: string, upstream: Launched, stamp: string): Promise<EngineRun> {
  const upstreamUrl = `http://127.0.0.1:${upstream.port}/v1`;
  const profDir = join(RESULTS_DIR, `cpuprof-chat-${stamp}`, engine);
  const run: EngineRun = { engine, nodeBinary, results: [], preflight: {}, profile: null, troupeExit: null, troupeDied: null };
  const { child, key } = await startTroupe(cfg, engine, nodeBinary, upstreamUrl, profDir);
  // The via-Troupe measured windows, first to last (a holder: it is filled inside the loop).
  const profile: { window: { start: number; end: number } | null } = { window: null };
  try {
    const base = `http://127.0.0.1:${child.port}`;
    const auth = `Bearer ${key}`;
    let model: string = BENCH_MODEL;
    if (cfg.troupeModel === 'character') {
      const created = (await fetchJson(`${base}/characters`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Bench', description: 'A gruff harbour master who hates pirates, used by the streaming chat load test.' }),
      }, 201)) as { id?: unknown };
      if (typeof created.id !== 'string') throw new Error(`troupe-${engine}: POST /characters returned no id`);
      model = created.id;
    }
    const direct = streamTarget('direct', upstream.port, BENCH_MODEL, 'Bearer sk-bench-upstream-ignored');
    const troupe = streamTarget('troupe', child.port, model, auth);
    run.preflight.direct = await preflight(direct, cfg);
    run.preflight.troupe = await preflight(troupe, cfg);
    log(`troupe-${engine}: pre-flight ok (direct total ${run.preflight.direct.totalMs.toFixed(1)} ms, via Troupe ${run.preflight.troupe.totalMs.toFixed(1)} ms)`);

    const watch = [{ name: 'troupe', pid: child.pid }, { name: 'upstream', pid: upstream.pid }];
    for (const rate of cfg.rates) {
      const options: PhaseOptions = {
        rate,
        warmupSec: cfg.warmupSec,
        durationSec: cfg.durationSec,
        requestTimeoutMs: cfg.requestTimeoutMs,
        maxSockets: cfg.maxSockets,
        expectedEvents: expectedEvents(cfg.tokens),
        expectedText: replyText(cfg.tokens),
        validateEvery: cfg.validateEvery,
        watch,
      };
      const quiet = async (label: string) => {
        const q = await waitForQuiet(cfg.quietWaitSec, cfg.quietPercent, watch);
        const other = q.otherPercent === null ? '?' : q.otherPercent.toFixed(0);
        log(`${engine} @ ${rate} req/s: ${label} (rest of the machine ${other}% of a core${q.waitedSec > 1.5 ? ` after waiting ${q.waitedSec.toFixed(0)} s` : ''})`);
        return q;
      };
      let directPhase: PhaseSummary;
      let troupePhase: PhaseSummary;
      const logBefore = child.stdoutBytesSinceReady();
      if (cfg.mode === 'interleaved') {
        const before = await quiet('direct and via Troupe, interleaved');
        const [d, t] = await runPhase([direct, troupe], options);
        if (!d || !t) throw new Error('runPhase returned fewer results than targets');
        const timings = await upstreamTimings(upstream.port);
        directPhase = summarizePhase(d, cfg.maxTtfcP99Ms, before, timings);
        troupePhase = summarizePhase(t, cfg.maxTtfcP99Ms, before, timings);
      } else {
        const directBefore = await quiet('direct');
        const [d] = await runPhase([direct], options);
        const troupeBefore = await quiet('via Troupe');
        const [t] = await runPhase([troupe], options);
        if (!d || !t) throw new Error('runPhase returned fewer results than targets');
        const timings = await upstreamTimings(upstream.port);
        directPhase = summarizePhase(d, cfg.maxTtfcP99Ms, directBefore, timings);
        troupePhase = summarizePhase(t, cfg.maxTtfcP99Ms, troupeBefore, timings);
      }
      const logBytes = child.stdoutBytesSinceReady() - logBefore;
      profile.window = { start: profile.window?.start ?? troupePhase.monotonicUs.start, end: troupePhase.monotonicUs.end };
      const result = compare(engine, directPhase, troupePhase, logBytes);
      run.results.push(result);
      if (!alive(child.pid)) {
        run.troupeDied = `Troupe (pid ${child.pid}) exited during the ${rate} req/s run; its last output:\n${child.tail().slice(-1500)}`;
        log(`troupe-${engine}: ${run.troupeDied}`);
        break;
      }
      log(
        `${engine} @ ${rate}: TTFC p99 ${directPhase.ttfc.p99.toFixed(2)} -> ${troupePhase.ttfc.p99.toFixed(2)} ms, ` +
          `total p99 ${directPhase.total.p99.toFixed(2)} -> ${troupePhase.total.p99.toFixed(2)} ms, ` +
          `achieved ${directPhase.achievedRps.toFixed(0)} / ${troupePhase.achievedRps.toFixed(0)} req/s, ` +
          `errors ${directPhase.errorCount} / ${troupePhase.errorCount}${result.sustained ? '' : ' (NOT sustained)'}`,
      );
      if (!result.sustained && !cfg.keepGoing) break;
    }
  } finally {
    // Graceful stop so --cpu-prof can write its profile; SIGKILL if it hangs.
    const exit = await child.stop(cfg.cpuProf ? 30_000 : 10_000);
    run.troupeExit = `code ${exit.code}, signal ${exit.signal}`;
    if (exit.code !== 0) log(`troupe-${engine}: exited with ${run.troupeExit}`);
  }
  if (cfg.cpuProf) {
    const file = await newestProfile(profDir);
    if (file) run.profile = await summarizeSrcProfile(file, profile.window);
    else log(`troupe-${engine}: no .cpuprofile written in ${profDir}`);
  }
  return run;
}

async function main(): Promise<void> {
  const cfg = readConfig();

  // Every step is bounded on its own; this is the last resort for the whole run.
  const perPhaseMs = (cfg.warmupSec + cfg.durationSec + cfg.quietWaitSec + 1) * 1000 + cfg.requestTimeoutMs + 5_000;
  const budgetMs = UWS_SCRIPT_TIMEOUT_MS + 60_000 + cfg.engines.length * (READY_TIMEOUT_MS + 60_000 + cfg.rates.length * 2 * perPhaseMs);
  const { started, stamp, disarm } = startRun('bench:chat', budgetMs);

  const git = await gitState(ROOT);
  const { path: uwsPath, note: uwsNote } = await uwsEngineNode(ROOT, cfg.engines.includes('uws'), log);

  const upstream = await launchUpstream({
    loadtestDir: HERE,
    script: 'chat-support/upstream-server.ts',
    env: {
      BENCH_TOKENS: String(cfg.tokens),
      BENCH_CHUNK_DELAY_MS: String(cfg.chunkDelayMs),
      BENCH_FIRST_CHUNK_DELAY_MS: String(cfg.firstChunkDelayMs),
    },
    readyMsg: UPSTREAM_READY_MSG,
    cwd: ROOT,
  });
  log(`benchmark upstream on 127.0.0.1:${upstream.port}: ${cfg.tokens} chunks, ${cfg.chunkDelayMs} ms apart`);

  const runs: EngineRun[] = [];
  const skipped: Array<{ engine: Engine; reason: string }> = [];
  let backgroundPercent: number | null = null;
  try {
    backgroundPercent = await sampleBackgroundPercent(1_000);
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

  const results = runs.flatMap((r) => r.results);
  const elapsedSec = (Date.now() - started) / 1000;
  const context = {
    ...machine(),
    client: 'node:http with a keep-alive Agent (lifo), open loop',
    backgroundCpuPercent: backgroundPercent,
    uwsNode: uwsNote,
    git,
    elapsedSec,
  };
  const reply = `${cfg.tokens} content chunks ${cfg.chunkDelayMs} ms apart` +
    (cfg.firstChunkDelayMs > 0 ? ` after a ${cfg.firstChunkDelayMs} ms first-chunk delay` : '') +
    ` (${expectedEvents(cfg.tokens)} SSE events with role, finish, usage and [DONE])`;
  const out = [
    '',
    `## Streaming chat benchmark (${new Date().toISOString()})`,
    '',
    `Each request streams the same completion: ${reply}. Direct = the benchmark upstream; troupe = Troupe's ` +
      `POST /v1/chat/completions with ${cfg.troupeModel === 'character' ? 'a character as model (system prompt added)' : `model ${BENCH_MODEL} (proxied as is)`}, ` +
      `LOG_LEVEL=${cfg.logLevel}. Open loop, ${cfg.durationSec} s measured after ${cfg.warmupSec} s of the same load per rate; ` +
      (cfg.mode === 'interleaved'
        ? 'the two paths INTERLEAVED (requests alternate, each path at the offered rate, so client and upstream carry twice it; CPU columns are that shared window); '
        : 'the two paths SEQUENTIAL (direct alone, then via Troupe alone, each at the offered rate); ') +
      `client, upstream and Troupe share this ${context.cpus}-CPU machine (${context.cpuModel}), Node ${process.version}.` +
      (cfg.cpuProf ? ' Troupe ran under --cpu-prof: its numbers are slowed by profiling.' : ''),
    '',
    phaseTable(results),
    '',
    addedTable(results),
    '',
    LEGEND,
    '',
    ...(legsTable(results) ? [legsTable(results), '', LEGS_LEGEND, ''] : []),
    ...headline(results, runs.map((r) => r.engine)),
    ...skipped.map((s) => `${s.engine}: skipped, ${s.reason}`),
    ...runs.filter((r) => r.troupeDied).map((r) => `troupe-${r.engine}: CRASHED: ${r.troupeDied}`),
    ...runs.flatMap((r) => {
      const logged = r.results.map((x) => x.troupeLogBytesPerRequest).filter((x): x is number => x !== null);
      return logged.length > 0 ? [`troupe-${r.engine}: ${Math.round(Math.max(...logged))} bytes of log per request at most (LOG_LEVEL=${cfg.logLevel}), drained from its stdout by this process.`] : [];
    }),
    ...noiseNotes(results, backgroundPercent),
    `Troupe source: ${git.head}${git.dirtySrc.length > 0 ? ` with uncommitted changes in ${git.dirtySrc.join(', ')}` : ''}.`,
    `Total run time: ${elapsedSec.toFixed(1)} s.`,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  for (const r of runs) if (r.profile) process.stdout.write(`\n${formatSrcProfile(r.profile, r.engine)}\n`);

  await mkdir(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `chat-stream-${stamp}.json`);
  const json = {
    context,
    config: cfg,
    skipped,
    engines: runs.map((r) => ({
      engine: r.engine,
      nodeBinary: r.nodeBinary,
      preflight: r.preflight,
      troupeExit: r.troupeExit,
      troupeDied: r.troupeDied,
      results: r.results.map(rateJson),
      profile: r.profile,
    })),
  };
  await writeFile(file, `${JSON.stringify(json, null, 2)}\n`);
  process.stdout.write(`\nResults written to ${file}\n`);
}

try {
  await main();
} catch (err) {
  process.stderr.write(`\n[bench:chat] FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  killAllChildren();
}
