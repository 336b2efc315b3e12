/**
 * The one way the benchmarks start Troupe: `node src/main.ts` as a child on 127.0.0.1 and a port
 * of its own, an in-memory database unless told otherwise, a fresh bootstrap key, and an
 * environment built only from what the benchmark passes (troupeEnv), never the developer's shell.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { CONFIG_VARIABLES } from '../../src/config.ts';
import { createTempDatabase } from '../../test/support/databases.ts';
import { delay, execFileAsync, freePort, launch, launchPolled, withFileLimit, type Launched } from './children.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export type Engine = 'node' | 'uws';

/** What a process needs to run at all; everything else a child gets is set by the benchmark. */
const PASSED_THROUGH = ['PATH', 'HOME', 'TMPDIR', 'LANG'];

/**
 * The whole environment of a benchmark child. Troupe's own variables come from src/config.ts,
 * so a misspelt or retired one fails here instead of being silently ignored.
 */
export function troupeEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const unknown = Object.keys(settings).filter((name) => !CONFIG_VARIABLES.includes(name) && !/^(BENCH_|NODE_ENV$)/.test(name));
  if (unknown.length > 0) throw new Error(`not Troupe configuration variables (src/config.ts): ${unknown.join(', ')}`);
  const env: NodeJS.ProcessEnv = {};
  for (const name of PASSED_THROUGH) if (process.env[name] !== undefined) env[name] = process.env[name];
  return Object.assign(env, settings);
}

export interface TroupeOptions {
  /** HTTP_ENGINE; unset = Troupe's default (auto), not checked. */
  engine?: Engine;
  /** A Node that can load uWebSockets.js (uwsEngineNode) for engine uws. */
  nodeBinary?: string;
  logLevel?: string;
  upstream?: { url: string; model: string };
  /** More of Troupe's variables (DATABASE_URL, REDIS_URL, ...): the only other ones it gets. */
  settings?: Record<string, string>;
  /** Node flags before src/main.ts (--cpu-prof, ...). */
  nodeArgs?: readonly string[];
  /** Preloads probe.ts: `gc` adds --expose-gc, `loopResolutionMs` monitors event-loop delay. */
  probe?: { gc?: boolean; loopResolutionMs?: number };
  /** Raises `ulimit -n` first. */
  fdLimit?: number;
  /** null: none, as a fresh install (Troupe then makes one and prints it). */
  key?: string | null;
  name?: string;
  /** Another checkout to run (bench:memory --compare). */
  cwd?: string;
  keepOutput?: boolean;
  onSpawn?: (pid: number) => void;
  readyTimeoutMs?: number;
}

export interface Troupe {
  child: Launched;
  key: string | null;
  /** `http://127.0.0.1:<port>` */
  base: string;
  auth: string;
  /** SIGUSR2 to the probe: a full GC when exposed, memory figures, GC pauses and loop delay since the last call. */
  probe(timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(graceMs?: number): Promise<string>;
}

export const newBootstrapKey = (): string => `sk-troupe-bench${randomBytes(12).toString('base64url')}`;

export async function startTroupe(options: TroupeOptions): Promise<Troupe> {
  const key = options.key === undefined ? newBootstrapKey() : options.key;
  const logLevel = options.logLevel ?? 'info';
  const name = options.name ?? `troupe-${options.engine ?? 'auto'}`;
  // Below info Troupe does not log the line with its port: choose it first and poll /healthz.
  const logsReadyLine = ['info', 'debug', 'trace'].includes(logLevel);
  const port = logsReadyLine ? 0 : await freePort();
  const probeFile = options.probe ? join(tmpdir(), `troupe-bench-probe-${process.pid}-${randomBytes(4).toString('hex')}.json`) : null;
  const env = troupeEnv({
    PORT: String(port),
    HOST: '127.0.0.1',
    ...(options.engine ? { HTTP_ENGINE: options.engine } : {}),
    ...(options.settings?.DATABASE_URL || options.settings?.TROUPE_DATA_DIR ? {} : { TROUPE_DATA_DIR: 'memory://' }),
    ...(key ? { TROUPE_BOOTSTRAP_KEY: key } : {}),
    LOG_LEVEL: logLevel,
    ...(options.upstream ? { INFERENCE_BASE_URL: options.upstream.url, INFERENCE_MODEL: options.upstream.model, INFERENCE_MAX_RETRIES: '0' } : {}),
    ...(probeFile ? { BENCH_PROBE_FILE: probeFile } : {}),
    ...(options.probe?.loopResolutionMs ? { BENCH_LOOP_RESOLUTION_MS: String(options.probe.loopResolutionMs) } : {}),
    ...options.settings,
  });
  const probeArgs = options.probe ? [...(options.probe.gc ? ['--expose-gc'] : []), '--import', pathToFileURL(join(ROOT, 'loadtest/support/probe.ts')).href] : [];
  const args = [...probeArgs, ...(options.nodeArgs ?? []), 'src/main.ts'];
  const command = options.nodeBinary ?? process.execPath;
  const spec = {
    name,
    ...(options.fdLimit ? withFileLimit(options.fdLimit, command, args) : { command, args }),
    env,
    cwd: options.cwd ?? ROOT,
    readyTimeoutMs: options.readyTimeoutMs ?? 90_000,
    keepOutput: options.keepOutput,
    onSpawn: options.onSpawn,
  };
  const child = logsReadyLine ? await launch({ ...spec, readyMsg: 'troupe listening' }) : await launchPolled({ ...spec, port });
  if (options.engine && child.readyInfo.engine !== options.engine) {
    await child.stop(5_000);
    throw new Error(`${name}: Troupe reports engine '${String(child.readyInfo.engine)}', not ${options.engine}`);
  }
  let seq = 0;
  return {
    child,
    key,
    base: `http://127.0.0.1:${child.port}`,
    auth: `Bearer ${key}`,
    async probe(timeoutMs = 20_000) {
      if (!probeFile) throw new Error(`${name} runs without the probe`);
      process.kill(child.pid, 'SIGUSR2');
      for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
        await delay(20);
        const report = JSON.parse(await readFile(probeFile, 'utf8').catch(() => '{}')) as Record<string, unknown>;
        if (typeof report.seq === 'number' && report.seq > seq) return ((seq = report.seq), report);
      }
      throw new Error(`${name}: the probe did not answer within ${timeoutMs} ms\n${child.tail()}`);
    },
    async stop(graceMs = 10_000) {
      const exit = await child.stop(graceMs);
      if (probeFile) await Promise.all([rm(probeFile, { force: true }), rm(`${probeFile}.tmp`, { force: true })]);
      return `code ${exit.code}, signal ${exit.signal}`;
    },
  };
}

/** An empty store for a Troupe child (a temporary PostgreSQL database or PGlite folder): its setting and how to remove it. */
export async function freshStore(backend: 'postgres' | 'pglite', databaseUrl: string): Promise<{ env: Record<string, string>; dispose: () => Promise<void> }> {
  if (backend === 'postgres') {
    const db = await createTempDatabase(databaseUrl);
    return { env: { DATABASE_URL: db.url }, dispose: db.drop };
  }
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-store-'));
  return { env: { TROUPE_DATA_DIR: dir }, dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** Colyseus' process id in Troupe's output (its `actor system ready` line, logged at LOG_LEVEL info). */
export const colyseusProcessId = (output: string): string | null => /"processId":"([^"]+)"[^\n]*"msg":"actor system ready"/.exec(output)?.[1] ?? null;

/** Which Colyseus process runs each room (conversation) by Redis' room cache. */
export async function roomPlacement(redisUrl: string): Promise<Map<string, string>> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const rooms = await redis.hgetall('roomcaches');
    return new Map(Object.entries(rooms).map(([roomId, json]) => [roomId, String((JSON.parse(json) as { processId?: unknown }).processId)]));
  } finally {
    redis.disconnect();
  }
}

/** A JSON request to Troupe that must answer `expected`; its parsed body. */
export async function callJson<T = unknown>(troupe: Pick<Troupe, 'base' | 'auth'>, method: string, path: string, body: unknown, expected: number): Promise<T> {
  const res = await fetch(`${troupe.base}${path}`, {
    method,
    headers: { authorization: troupe.auth, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: expected ${expected}, got ${res.status}: ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : null) as T;
}

export async function createCharacter(troupe: Pick<Troupe, 'base' | 'auth'>, name = 'Bench'): Promise<string> {
  const created = await callJson<{ id?: unknown }>(troupe, 'POST', '/characters', { name, description: 'A gruff harbour master who hates pirates, used by the load tests.' }, 201);
  if (typeof created.id !== 'string') throw new Error('POST /characters returned no id');
  return created.id;
}

/**
 * A Node binary that can load uWebSockets.js: $UWS_NODE, else the last line `bash .ci/uws-node.sh`
 * prints (it may build a glibc-patched copy on first use). null with the reason when there is none.
 */
export async function uwsEngineNode(wanted: boolean, log: (line: string) => void): Promise<{ path: string | null; note: string }> {
  if (!wanted) return { path: null, note: 'not requested' };
  let candidate = process.env.UWS_NODE?.trim() ?? '';
  const source = candidate ? 'UWS_NODE' : '.ci/uws-node.sh';
  const failed = (note: string) => (log(`no uWS-capable node, uws skipped: ${note}`), { path: null, note });
  const why = (err: unknown) => {
    const e = err as Error & { stderr?: string; killed?: boolean };
    // The last "Error:" line is the root cause (typically "version `GLIBC_2.38' not found").
    return e.killed ? 'timed out' : (e.stderr?.split('\n').filter((l) => /Error: |ERROR/.test(l)).at(-1) ?? e.message.split('\n')[0] ?? '?').slice(0, 300);
  };
  if (!candidate) {
    try {
      const { stdout } = await execFileAsync('bash', [join(ROOT, '.ci', 'uws-node.sh')], { cwd: ROOT, timeout: 10 * 60_000, maxBuffer: 1 << 20 });
      candidate = stdout.trim().split('\n').at(-1)?.trim() ?? '';
    } catch (err) {
      return failed(`.ci/uws-node.sh failed: ${why(err)}`);
    }
  }
  try {
    await execFileAsync(candidate, ['--input-type=commonjs', '-e', 'require("uWebSockets.js")'], { cwd: ROOT, timeout: 30_000 });
  } catch (err) {
    return failed(`${candidate} (from ${source}) cannot load uWebSockets.js: ${why(err)}`);
  }
  log(`uWS-capable node: ${candidate} (from ${source})`);
  return { path: candidate, note: `${candidate} (from ${source})` };
}
