/**
 * `npm run bench:gateway`: what Troupe adds to an OpenAI-compatible call, next to a floor (a bare
 * node:http pipe proxy) and a peer (Portkey's gateway), over one fake upstream streaming
 * BENCH_TOKENS chunks BENCH_CHUNK_DELAY_MS apart. Parts (BENCH_PARTS):
 *   proxy    per rate, the streaming targets interleaved in one schedule, then the non-streaming
 *            ones; added = target percentile minus direct percentile of the same schedule.
 *   cpu      each proxying process loaded alone at BENCH_CPU_RATE: its CPU per call (/proc).
 *   perform  POST /perform interleaved with the upstream request Troupe made for it, replayed.
 *   reads    GET /characters/{id}, each server alone under autocannon (bench:http): Troupe on
 *            both engines and the bare node:http and uWS servers sending the same bytes.
 * Environment (defaults): BENCH_RATES (50,100,200), BENCH_DURATION s (10), BENCH_WARMUP s (2),
 * BENCH_CPU_RATE (100), BENCH_CPU_DURATION s (5), BENCH_PERFORM_RATE (50), BENCH_READ_CONNECTIONS (50),
 * BENCH_TOKENS (20), BENCH_CHUNK_DELAY_MS (2), BENCH_ENGINE for /v1 and perform (node), BENCH_LOG_LEVEL (info),
 * BENCH_PARTS (proxy,cpu,perform,reads), BENCH_TARGETS (pipe,troupe-upstream-model,troupe-character,portkey;
 * direct always runs), BENCH_CPU_PROF (1: Troupe under --cpu-prof, top frames in the report),
 * BENCH_QUIET_WAIT s (10: wait at most this long for the rest of the machine to use < 60% of a core),
 * UWS_NODE (else `bash .ci/uws-node.sh`). Writes loadtest/results/gateway-<stamp>.{json,md}.
 */
import { access } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { childEnv, execFileAsync, freePort, gitState, launchPolled, machine, runBench } from './support/children.ts';
import type { Launched, Run } from './support/children.ts';
import { envFlag, envList, envLogLevel, envNumber, envRates, envText } from './support/env.ts';
import { monotonicUs, performTargets, requestOnce, runLoad, saturate, type HttpTarget } from './support/load.ts';
import { processCpuSeconds, waitForQuiet } from './support/proc.ts';
import { profileText } from './support/profile.ts';
import { RESULTS_DIR, writeResults } from './support/report.ts';
import { callJson, createCharacter, startTroupe, uwsEngineNode, type Engine } from './support/troupe.ts';
import { BENCH_MODEL, startServer, startUpstream } from './support/upstream.ts';
import { gatewayMarkdown, phaseResult, type CpuRow, type GatewayResult } from './gateway-report.ts';

const PARTS = ['proxy', 'cpu', 'perform', 'reads'] as const;
const PROXIES = ['pipe', 'troupe-upstream-model', 'troupe-character', 'portkey'] as const;
const cfg = {
  rates: envRates('BENCH_RATES', '50,100,200'),
  durationSec: envNumber('BENCH_DURATION', 10, 1, false),
  warmupSec: envNumber('BENCH_WARMUP', 2, 0, false),
  cpuRate: envNumber('BENCH_CPU_RATE', 100, 1, false),
  cpuDurationSec: envNumber('BENCH_CPU_DURATION', 5, 1, false),
  performRate: envNumber('BENCH_PERFORM_RATE', 50, 1, false),
  readConnections: envNumber('BENCH_READ_CONNECTIONS', 50, 1),
  tokens: envNumber('BENCH_TOKENS', 20, 1),
  chunkDelayMs: envNumber('BENCH_CHUNK_DELAY_MS', 2, 0),
  engine: (envText('BENCH_ENGINE') ?? 'node') as Engine,
  logLevel: envLogLevel('BENCH_LOG_LEVEL', 'info'),
  parts: envList('BENCH_PARTS', PARTS),
  proxies: envList('BENCH_TARGETS', PROXIES),
  cpuProf: envFlag('BENCH_CPU_PROF'),
  quietWaitSec: envNumber('BENCH_QUIET_WAIT', 10, 0, false),
};
if (cfg.engine !== 'node' && cfg.engine !== 'uws') throw new Error(`BENCH_ENGINE must be node or uws, got '${String(cfg.engine)}'`);
const MESSAGES = [{ role: 'user', content: 'The fog is thick tonight. Which ships came in, and did any of them fly a black flag?' }];
const PORTKEY_VERSION = '1.15.2';

function chatTarget(label: string, port: number, model: string, stream: boolean, headers: Record<string, string>): HttpTarget {
  const body = stream
    ? { model, messages: MESSAGES, stream: true, stream_options: { include_usage: true } }
    : { model, messages: MESSAGES, stream: false };
  return {
    label, port, method: 'POST', path: '/v1/chat/completions', body: Buffer.from(JSON.stringify(body)), stream,
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench-upstream', ...headers },
  };
}

/** One request per target, which must succeed; returns the labels that failed, with why. */
async function preflight(targets: readonly HttpTarget[]): Promise<Record<string, string>> {
  const failed: Record<string, string> = {};
  for (const target of targets) {
    const got = await requestOnce(target);
    if (got.failure !== null) failed[target.label] = `${got.failure}: ${got.detail}`;
  }
  return failed;
}

const cpuPerCall = (before: number | null, after: number | null, calls: number) =>
  before === null || after === null || calls === 0 ? null : ((after - before) * 1000) / calls;

/** Loads `target` alone and returns the CPU `server` spent per measured request. */
async function cpuAlone(target: HttpTarget, server: Launched): Promise<CpuRow> {
  const cpu: Record<'start' | 'end', number | null> = { start: null, end: null };
  const onWindow = (edge: 'start' | 'end') => void (cpu[edge] = processCpuSeconds(server.pid));
  const [run] = await runLoad([target], { rate: cfg.cpuRate, warmupSec: 1, durationSec: cfg.cpuDurationSec, onWindow });
  const calls = run?.scheduled ?? 0;
  const cpuMsPerCall = cpuPerCall(cpu.start, cpu.end, calls);
  return { label: target.label, process: server.name, rate: cfg.cpuRate, calls, failures: calls - (run?.ok ?? 0), cpuMsPerCall };
}

/**
 * Portkey's open-source gateway (the peer, not the subject): installed on first use into a cache
 * folder (never a project dependency) and started headless. Without it the run goes on, and says so.
 */
async function startPortkey(result: GatewayResult, log: Run['log']): Promise<Launched | null> {
  try {
    const dir = join(process.env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache'), 'troupe-bench', `portkey-${PORTKEY_VERSION}`);
    const script = join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
    if (!(await access(script).then(() => true, () => false))) {
      log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into ${dir}`);
      const args = ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', `@portkey-ai/gateway@${PORTKEY_VERSION}`];
      await execFileAsync('npm', args, { timeout: 300_000, maxBuffer: 1 << 24 });
    }
    const port = await freePort();
    const args = [script, `--port=${port}`, '--headless'];
    const env = childEnv({ NODE_ENV: 'production' });
    const options = { name: 'portkey', command: process.execPath, args, env, cwd: join(script, '..'), port, healthPath: '/' };
    return await launchPolled({ ...options, readyTimeoutMs: 30_000 });
  } catch (err) {
    result.notes.push(`Portkey's gateway could not be installed or started, so it is missing: ${(err as Error).message.split('\n')[0]}`);
    return null;
  }
}

runBench('bench:gateway', 60 * 60_000, async (run) => {
  const result: GatewayResult = {
    config: cfg, machine: machine(), git: await gitState(), startedAt: new Date(run.started).toISOString(),
    proxy: [], cpu: [], perform: null, reads: [], notes: [], profile: null,
  };
  const uwsNode = cfg.engine === 'uws' || cfg.parts.includes('reads') ? (await uwsEngineNode(true, run.log)).path : null;
  if (cfg.engine === 'uws' && uwsNode === null) throw new Error('BENCH_ENGINE=uws but no Node here can load uWebSockets.js');
  if (cfg.parts.some((p) => p !== 'reads')) await chatParts(result, run, uwsNode);
  if (cfg.parts.includes('reads')) await reads(result, run, uwsNode);
  const markdown = gatewayMarkdown(result);
  const paths = await writeResults('gateway', run.stamp, result, markdown);
  process.stdout.write(`${markdown}\n\nWrote ${paths.json}\nand ${paths.markdown}\n`);
});

/** With BENCH_CPU_PROF: the top frames of the profile Troupe wrote into `dir` on its way out. */
async function addProfile(result: GatewayResult, dir: string, label: string, window: { start: number; end: number }): Promise<void> {
  const text = cfg.cpuProf ? await profileText(dir, window, label) : null;
  if (text) result.profile = [result.profile, text].filter(Boolean).join('\n\n');
}

/** proxy, cpu and perform: one upstream, the pipe, one Troupe and Portkey, stopped at the end. */
async function chatParts(result: GatewayResult, { stamp, log }: Run, uwsNode: string | null): Promise<void> {
  const upstream = await startUpstream({ BENCH_REPLY_TOKENS: String(cfg.tokens), BENCH_REPLY_GAP_MS: String(cfg.chunkDelayMs) });
  const upstreamV1 = `http://127.0.0.1:${upstream.port}/v1`;
  const pipe = await startServer(['pipe'], { BENCH_UPSTREAM_PORT: String(upstream.port) });
  const profDir = join(RESULTS_DIR, `cpuprof-gateway-${stamp}`);
  const troupe = await startTroupe({
    engine: cfg.engine, nodeBinary: cfg.engine === 'uws' ? (uwsNode ?? undefined) : undefined, logLevel: cfg.logLevel,
    upstream: { url: upstreamV1, model: BENCH_MODEL }, cpuProfDir: cfg.cpuProf ? profDir : null,
  });
  const characterId = await createCharacter(troupe);
  const wantsPortkey = cfg.proxies.includes('portkey') && (cfg.parts.includes('proxy') || cfg.parts.includes('cpu'));
  const portkey = wantsPortkey ? await startPortkey(result, log) : null;
  log(`upstream :${upstream.port}, pipe :${pipe.port}, troupe-${cfg.engine} :${troupe.child.port}` +
    `${portkey ? `, portkey :${portkey.port}` : ''}`);
  const troupeHeaders = { authorization: troupe.auth };
  const servers: Record<string, Launched> = { direct: upstream, pipe, 'troupe-upstream-model': troupe.child,
    'troupe-character': troupe.child };
  if (portkey) servers.portkey = portkey;
  const portkeyHeaders = { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamV1 };
  const targetsFor = (stream: boolean): HttpTarget[] => [
    chatTarget('direct', upstream.port, BENCH_MODEL, stream, {}),
    ...[
      chatTarget('pipe', pipe.port, BENCH_MODEL, stream, {}),
      chatTarget('troupe-upstream-model', troupe.child.port, BENCH_MODEL, stream, troupeHeaders),
      chatTarget('troupe-character', troupe.child.port, characterId, stream, troupeHeaders),
      ...(portkey ? [chatTarget('portkey', portkey.port, BENCH_MODEL, stream, portkeyHeaders)] : []),
    ].filter((t) => (cfg.proxies as readonly string[]).includes(t.label)),
  ];
  const failedStream = await preflight(targetsFor(true));
  const failedPlain = await preflight(targetsFor(false));
  for (const [label, why] of Object.entries({ ...failedStream, ...failedPlain })) log(`pre-flight failed for ${label}: ${why}`);
  if (failedStream.portkey) {
    const why = failedStream.portkey.slice(0, 200);
    result.notes.push(`Portkey's streaming pre-flight failed (${why}), so it is compared on non-streaming calls only.`);
  }
  const broken = Object.keys({ ...failedStream, ...failedPlain }).filter((l) => l !== 'portkey');
  if (broken.length > 0) throw new Error(`pre-flight failed for ${broken.join(', ')}`);
  const streamTargets = targetsFor(true).filter((t) => !failedStream[t.label]);
  const plainTargets = targetsFor(false).filter((t) => !failedPlain[t.label]);
  const processes = { upstream, pipe, troupe: troupe.child, ...(portkey ? { portkey } : {}) };
  const watched = Object.entries(processes).map(([name, c]) => ({ name, pid: c.pid }));
  const measuredFrom = monotonicUs();
  for (const rate of cfg.parts.includes('proxy') ? cfg.rates : []) {
    for (const [mode, targets] of [['streaming', streamTargets], ['non-streaming', plainTargets]] as const) {
      const quiet = await waitForQuiet(cfg.quietWaitSec, 60, watched);
      const others = quiet.otherPercent?.toFixed(0) ?? '?';
      log(`proxy: ${mode} at ${rate} req/s per target (${targets.length} targets interleaved; others used ${others}% of a core before)`);
      const runs = await runLoad(targets, { rate, warmupSec: cfg.warmupSec, durationSec: cfg.durationSec, watch: watched });
      result.proxy.push({ rate, mode, ...phaseResult(runs), cpuPercent: runs[0]?.cpu ?? null });
    }
  }
  for (const target of cfg.parts.includes('cpu') ? [...streamTargets, ...plainTargets] : []) {
    const server = servers[target.label];
    if (!server) continue;
    log(`cpu: ${target.label} ${target.stream ? 'streaming' : 'non-streaming'} alone at ${cfg.cpuRate} req/s`);
    result.cpu.push({ ...(await cpuAlone(target, server)), stream: target.stream === true });
  }
  if (cfg.parts.includes('perform')) {
    log(`perform: POST /perform and the direct streamed call interleaved at ${cfg.performRate} req/s each`);
    const { perform, direct } = await performTargets(troupe, characterId, MESSAGES[0]?.content ?? '', upstream.port);
    const runs = await runLoad([direct, perform], { rate: cfg.performRate, warmupSec: cfg.warmupSec, durationSec: cfg.durationSec });
    result.perform = { rate: cfg.performRate, ...phaseResult(runs) };
  }
  const measuredTo = monotonicUs();
  // A graceful stop lets --cpu-prof write its profile.
  await Promise.all([pipe.stop(), portkey?.stop(), troupe.stop(30_000), upstream.stop()]);
  await addProfile(result, profDir, `troupe-${cfg.engine}, proxy/cpu/perform`, { start: measuredFrom, end: measuredTo });
}

/** GET /characters/{id}: each server alone under autocannon, Troupe on both engines against the bare servers. */
async function reads(result: GatewayResult, { stamp, log }: Run, uwsNode: string | null): Promise<void> {
  if (!uwsNode) result.notes.push('No Node here can load uWebSockets.js: the uWS read rows are missing.');
  for (const engine of uwsNode ? (['uws', 'node'] as const) : (['node'] as const)) {
    const nodeBinary = engine === 'uws' ? (uwsNode ?? undefined) : undefined;
    const profDir = join(RESULTS_DIR, `cpuprof-gateway-${stamp}`, `reads-${engine}`);
    const troupe = await startTroupe({ engine, nodeBinary, logLevel: cfg.logLevel, cpuProfDir: cfg.cpuProf ? profDir : null });
    const id = await createCharacter(troupe);
    const body = JSON.stringify(await callJson(troupe, 'GET', `/characters/${id}`, undefined, 200));
    const bare = await startServer(['bare', engine], { BENCH_BODY: body }, nodeBinary);
    // The same (ignored by the bare server) header both ways, so requests are byte for byte alike.
    const headers = { authorization: troupe.auth };
    const window = { start: 0, end: 0 };
    for (const server of [troupe.child, bare]) {
      log(`reads: ${server.name} alone, autocannon with ${cfg.readConnections} connections`);
      const load = { url: `http://127.0.0.1:${server.port}/characters/${id}`, connections: cfg.readConnections, headers };
      await saturate({ ...load, durationSec: 1 });
      const before = processCpuSeconds(server.pid);
      if (server === troupe.child) window.start = monotonicUs();
      const stats = await saturate({ ...load, durationSec: cfg.cpuDurationSec });
      if (server === troupe.child) window.end = monotonicUs();
      const calls = stats.totalRequests;
      result.reads.push({
        engine, label: 'read', process: server.name, rate: Math.round(stats.requestsPerSec), calls, failures: stats.failures,
        cpuMsPerCall: cpuPerCall(before, processCpuSeconds(server.pid), calls),
        latencyMs: { p50: stats.latencyMs.p50, p99: stats.latencyMs.p99 },
      });
    }
    await Promise.all([bare.stop(), troupe.stop(30_000)]);
    await addProfile(result, profDir, `troupe-${engine}, reads`, window);
  }
}
