/**
 * HTTP read benchmark: `npm run bench:http`.
 *
 * Measures Troupe's hot read path (GET /characters/{id}, served from the in-process cache) on
 * each HTTP engine, next to two bare hello-world servers (uWebSockets.js and node:http) that
 * return a body of the same size. Every server is a child process, started and benchmarked one
 * at a time on 127.0.0.1; autocannon runs in this process. Prints a markdown table and writes
 * the raw numbers to loadtest/results/http-read-<timestamp>.json.
 *
 * Environment:
 *   BENCH_DURATION     measured seconds per target (default 5)
 *   BENCH_WARMUP       warmup seconds per target, discarded (default 1; 0 disables)
 *   BENCH_CONNECTIONS  concurrent connections (default 50)
 *   BENCH_TARGETS      comma-separated subset of troupe-node,troupe-uws,bare-uws,bare-node
 *   BENCH_CPU_PROF     1: run every server child with --cpu-prof and print its top frames
 *                      (profiling slows them down; don't compare those req/s with plain runs)
 *   UWS_NODE           Node binary that can load uWebSockets.js; else `bash .ci/uws-node.sh`
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killAllChildren, launch, type Launched } from './support/children.ts';
import { sampleBackgroundPercent, startCpuMeter } from './support/cpu.ts';
import { runLoad, type LoadStats } from './support/load.ts';
import { formatProfile, newestProfile, PROFILE_FOOTNOTE, summarizeProfile, type ProfileSummary } from './support/profile.ts';
import { cpuNotes, markdownTable, ratioNotes, type Skipped, type TargetResult } from './support/report.ts';
import { BARE_READY_MSG } from './support/sample-body.ts';
import { troupeEnv } from './support/troupe-env.ts';
import { machine, startRun, uwsEngineNode } from './support/run.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const TARGET_IDS = ['troupe-node', 'troupe-uws', 'bare-uws', 'bare-node'] as const;
type TargetId = (typeof TARGET_IDS)[number];

interface BenchConfig {
  durationSec: number;
  warmupSec: number;
  connections: number;
  targets: readonly TargetId[];
  cpuProf: boolean;
}

const UWS_SCRIPT_TIMEOUT_MS = 10 * 60_000;
const READY_TIMEOUT_MS = 90_000;
const FETCH_TIMEOUT_MS = 10_000;

function readConfig(): BenchConfig {
  const num = (name: string, fallback: number, min: number): number => {
    const raw = process.env[name]?.trim();
    if (!raw) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number >= ${min}, got '${raw}'`);
    return value;
  };
  const wanted = process.env.BENCH_TARGETS?.trim();
  let targets: readonly TargetId[] = TARGET_IDS;
  if (wanted) {
    const ids = wanted.split(',').map((s) => s.trim()).filter(Boolean);
    const unknown = ids.filter((id) => !(TARGET_IDS as readonly string[]).includes(id));
    if (unknown.length > 0) throw new Error(`BENCH_TARGETS: unknown ${unknown.join(', ')}; known: ${TARGET_IDS.join(', ')}`);
    targets = TARGET_IDS.filter((id) => ids.includes(id));
  }
  return {
    durationSec: num('BENCH_DURATION', 5, 1),
    warmupSec: num('BENCH_WARMUP', 1, 0),
    connections: Math.round(num('BENCH_CONNECTIONS', 50, 1)),
    targets,
    cpuProf: ['1', 'true', 'yes'].includes(process.env.BENCH_CPU_PROF?.trim() ?? ''),
  };
}

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

async function fetchChecked(url: string, init: RequestInit, expected: number): Promise<string> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${init.method ?? 'GET'} ${url}: expected ${expected}, got ${res.status}: ${text.slice(0, 300)}`);
  return text;
}

/** Warmup (discarded) then the measured run, against one already-running target. */
async function measure(
  cfg: BenchConfig,
  id: string,
  url: string,
  headers: Record<string, string>,
  child: Launched,
): Promise<Pick<TargetResult, 'warmup' | 'measured' | 'stdoutBytes' | 'cpu'>> {
  const load = { url, connections: cfg.connections, headers };
  let warmup: LoadStats | null = null;
  if (cfg.warmupSec > 0) {
    log(`${id}: warmup ${cfg.warmupSec}s`);
    warmup = await runLoad({ ...load, durationSec: cfg.warmupSec });
  }
  log(`${id}: measuring ${cfg.durationSec}s with ${cfg.connections} connections`);
  const before = child.stdoutBytesSinceReady();
  const stopMeter = startCpuMeter(child.pid);
  const measured = await runLoad({ ...load, durationSec: cfg.durationSec });
  const cpu = stopMeter();
  const stdoutBytes = child.stdoutBytesSinceReady() - before;
  log(`${id}: ${Math.round(measured.requestsPerSec.average)} req/s, p99 ${measured.latencyMs.p99} ms`);
  return { warmup, measured, stdoutBytes, cpu };
}

interface RunState {
  cfg: BenchConfig;
  stamp: string;
  results: TargetResult[];
  skipped: Skipped[];
  profiles: Array<{ id: string; summary: ProfileSummary }>;
  characterBody: string | null;
}

interface Prepared {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * Starts one server child, lets `prepare` set it up, benchmarks it and stops it again (always).
 * With BENCH_CPU_PROF the child runs under --cpu-prof and its profile is summarised afterwards.
 */
async function benchChild(
  state: RunState,
  id: TargetId,
  nodeBinary: string,
  spec: { script: string; env: NodeJS.ProcessEnv; readyMsg: string; readyTimeoutMs: number },
  prepare: (child: Launched) => Promise<Prepared>,
): Promise<void> {
  const [target, engine] = id.split('-') as ['troupe' | 'bare', 'node' | 'uws'];
  const profDir = join(RESULTS_DIR, `cpuprof-${state.stamp}`, id);
  const nodeArgs = state.cfg.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  log(`${id}: starting ${spec.script} with ${nodeBinary}`);
  const child = await launch({
    name: id, command: nodeBinary, args: [...nodeArgs, spec.script], env: spec.env, cwd: ROOT,
    readyMsg: spec.readyMsg, readyTimeoutMs: spec.readyTimeoutMs,
  });
  let window: LoadStats['monotonicUs'] | null = null;
  try {
    const { url, headers, body } = await prepare(child);
    const run = await measure(state.cfg, id, url, headers, child);
    window = run.measured.monotonicUs;
    state.results.push({ id, target, engine, url, nodeBinary, responseBytes: Buffer.byteLength(body), ...run });
  } finally {
    // Graceful stop so --cpu-prof can write its profile; SIGKILL if it hangs.
    const exit = await child.stop(state.cfg.cpuProf ? 30_000 : 10_000);
    if (exit.code !== 0) log(`${id}: exited with code ${exit.code}, signal ${exit.signal}`);
  }
  if (!state.cfg.cpuProf) return;
  const file = await newestProfile(profDir);
  if (file) state.profiles.push({ id, summary: await summarizeProfile(file, window) });
  else log(`${id}: no .cpuprofile written in ${profDir}`);
}

function benchTroupe(state: RunState, engine: 'node' | 'uws', nodeBinary: string): Promise<void> {
  const id = `troupe-${engine}` as const;
  const key = `sk-troupe-bench${randomBytes(12).toString('base64url')}`;
  const env = troupeEnv({ PORT: '0', HOST: '127.0.0.1', HTTP_ENGINE: engine, TROUPE_DATA_DIR: 'memory://', TROUPE_BOOTSTRAP_KEY: key, LOG_LEVEL: 'info' });
  const spec = { script: 'src/main.ts', env, readyMsg: 'troupe listening', readyTimeoutMs: READY_TIMEOUT_MS };
  return benchChild(state, id, nodeBinary, spec, async (child) => {
    if (child.readyInfo.engine !== engine) throw new Error(`${id}: Troupe reports engine '${String(child.readyInfo.engine)}', wanted '${engine}'`);
    const base = `http://127.0.0.1:${child.port}`;
    const auth = { authorization: `Bearer ${key}` };
    await fetchChecked(`${base}/healthz`, {}, 200);
    const created = JSON.parse(
      await fetchChecked(`${base}/characters`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Bench', description: 'A character created by the HTTP read load test.' }),
      }, 201),
    ) as { id?: unknown };
    if (typeof created.id !== 'string') throw new Error(`${id}: POST /characters returned no id`);
    const url = `${base}/characters/${created.id}`;
    const body = await fetchChecked(url, { headers: auth }, 200); // warms the cache
    state.characterBody ??= body;
    return { url, headers: auth, body };
  });
}

function benchBare(state: RunState, engine: 'node' | 'uws', nodeBinary: string): Promise<void> {
  const script = join(HERE, 'support', engine === 'uws' ? 'bare-uws-server.ts' : 'bare-node-server.ts');
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_PORT: '0' };
  if (state.characterBody) env.BENCH_BODY = state.characterBody;
  const spec = { script, env, readyMsg: BARE_READY_MSG, readyTimeoutMs: 30_000 };
  return benchChild(state, `bare-${engine}`, nodeBinary, spec, async (child) => {
    const url = `http://127.0.0.1:${child.port}/characters/bench`;
    const body = await fetchChecked(url, {}, 200);
    // Same (ignored) header as the Troupe runs, so requests are byte-for-byte alike.
    return { url, headers: { authorization: 'Bearer sk-troupe-bench-baseline-ignored' }, body };
  });
}

async function main(): Promise<void> {
  const cfg = readConfig();
  // Everything below is bounded: startup, each run, each stop; this is the last resort.
  const budgetMs = UWS_SCRIPT_TIMEOUT_MS + cfg.targets.length * ((cfg.warmupSec + cfg.durationSec) * 1000 + 200_000);
  const { started, stamp, disarm } = startRun('bench:http', budgetMs);
  const state: RunState = { cfg, stamp, results: [], skipped: [], profiles: [], characterBody: null };

  const { path: uwsPath, note: uwsNote } = await uwsEngineNode(ROOT, cfg.targets.some((t) => t.endsWith('-uws')), log);

  const backgroundPercent = await sampleBackgroundPercent(2_000);
  for (const id of cfg.targets) {
    const [kind, engine] = id.split('-') as ['troupe' | 'bare', 'node' | 'uws'];
    const nodeBinary = engine === 'uws' ? uwsPath : process.execPath;
    if (!nodeBinary) {
      state.skipped.push({ id, reason: `skipped (no uWS-capable node): ${uwsNote}` });
      continue;
    }
    if (kind === 'troupe') await benchTroupe(state, engine, nodeBinary);
    else await benchBare(state, engine, nodeBinary);
  }
  disarm();

  const elapsedSec = (Date.now() - started) / 1000;
  const context = {
    ...machine(),
    connections: cfg.connections,
    durationSec: cfg.durationSec,
    warmupSec: cfg.warmupSec,
    cpuProf: cfg.cpuProf,
    backgroundCpuPercent: backgroundPercent,
    responseBytes: state.characterBody ? Buffer.byteLength(state.characterBody) : null,
    elapsedSec,
  };
  const out = [
    '',
    `## HTTP read benchmark (${new Date().toISOString()})`,
    '',
    `${cfg.connections} connections, ${cfg.durationSec}s measured after ${cfg.warmupSec}s warmup per target; ` +
      `autocannon in the bench process on the same ${context.cpus}-CPU machine (${context.cpuModel}), Node ${process.version}.` +
      (cfg.cpuProf ? ' The servers ran under --cpu-prof: their numbers are slowed by profiling.' : ''),
    '',
    markdownTable(state.results),
    '',
    ...ratioNotes(state.results),
    ...state.skipped.map((s) => `${s.id}: ${s.reason}`),
    ...cpuNotes(state.results, backgroundPercent),
    ...state.results
      .filter((r) => r.target === 'troupe' && r.measured.totalRequests > 0)
      .map((r) => `${r.id}: ${Math.round(r.stdoutBytes / r.measured.totalRequests)} bytes of log per request drained from stdout; response body ${r.responseBytes} bytes.`),
    `Total run time: ${elapsedSec.toFixed(1)} s.`,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  for (const p of state.profiles) process.stdout.write(`\n${formatProfile(p.summary, p.id)}\n`);
  if (state.profiles.length > 0) process.stdout.write(`\n${PROFILE_FOOTNOTE}\n`);

  await mkdir(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `http-read-${stamp}.json`);
  const json = { context, results: state.results, skipped: state.skipped, profiles: state.profiles };
  await writeFile(file, `${JSON.stringify(json, null, 2)}\n`);
  process.stdout.write(`\nResults written to ${file}\n`);
}

try {
  await main();
} catch (err) {
  process.stderr.write(`\n[bench] FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  killAllChildren();
}
