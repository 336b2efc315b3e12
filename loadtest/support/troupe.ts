/** The one way the benchmarks start Troupe (only the benchmark's settings reach it), and the API calls every scenario makes. */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { CONFIG_VARIABLES } from '../../src/config.ts';
import { createTempDatabase } from '../../test/support/databases.ts';
import { childEnv, delay, execFileAsync, freePort, launch, ROOT, withFileLimit } from './children.ts';
import type { Launched, Log } from './children.ts';

export type Engine = 'node' | 'uws';
/** engine: HTTP_ENGINE (unset: auto, not checked); settings: more of Troupe's variables, the only other ones it gets; probe:
 * preload probe.ts (`gc` adds --expose-gc); fdLimit: raise `ulimit -n` first; key null: none, as a fresh install; cwd: another checkout. */
export type TroupeOptions = {
  engine?: Engine; nodeBinary?: string; logLevel?: string; upstream?: { url: string; model: string }; settings?: Record<string, string>;
  cpuProfDir?: string | null; probe?: { gc?: boolean; loopResolutionMs?: number }; fdLimit?: number; key?: string | null; name?: string;
  cwd?: string; keepOutput?: boolean; onSpawn?: (pid: number) => void; readyTimeoutMs?: number;
};
type Api = { base: string; auth: string };
/** probe(): SIGUSR2 to the probe: a full GC when exposed, memory figures, GC pauses and loop delay since the last call. */
export type Troupe = Api & {
  child: Launched; key: string | null; probe(timeoutMs?: number): Promise<Record<string, unknown>>; stop(graceMs?: number): Promise<string>;
};
export const newBootstrapKey = (): string => `sk-troupe-bench${randomBytes(12).toString('base64url')}`;
export async function startTroupe(options: TroupeOptions): Promise<Troupe> {
  const { upstream, probe, settings, logLevel = 'info', name = `troupe-${options.engine ?? 'auto'}` } = options;
  const key = options.key === undefined ? newBootstrapKey() : options.key;
  // Below info Troupe does not log the line with its port: choose it first and poll /healthz.
  const logsReadyLine = ['info', 'debug', 'trace'].includes(logLevel);
  const port = logsReadyLine ? 0 : await freePort();
  const probeFile = options.probe ? join(tmpdir(), `troupe-bench-probe-${process.pid}-${randomBytes(4).toString('hex')}.json`) : null;
  const env: Record<string, string> = {
    PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: logLevel, ...(options.engine ? { HTTP_ENGINE: options.engine } : {}),
    ...(settings?.DATABASE_URL || settings?.TROUPE_DATA_DIR ? {} : { TROUPE_DATA_DIR: 'memory://' }),
    ...(key ? { TROUPE_BOOTSTRAP_KEY: key } : {}), ...(probeFile ? { BENCH_PROBE_FILE: probeFile } : {}),
    ...(upstream ? { INFERENCE_BASE_URL: upstream.url, INFERENCE_MODEL: upstream.model, INFERENCE_MAX_RETRIES: '0' } : {}),
    ...(probe?.loopResolutionMs ? { BENCH_LOOP_RESOLUTION_MS: String(probe.loopResolutionMs) } : {}),
    ...settings,
  };
  // Troupe's variables are checked against src/config.ts, so a misspelt one fails here.
  const unknown = Object.keys(env).filter((name) => !CONFIG_VARIABLES.includes(name) && !/^(BENCH_|NODE_ENV$)/.test(name));
  if (unknown.length > 0) throw new Error(`not Troupe configuration variables (src/config.ts): ${unknown.join(', ')}`);
  const args = [...(probe ? [...(probe.gc ? ['--expose-gc'] : []), '--import', new URL('probe.ts', import.meta.url).href] : []),
    ...(options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : []), ...(await startFlags(options.cwd ?? ROOT)), 'src/main.ts'];
  const command = options.nodeBinary ?? process.execPath;
  const spec = { name, ...(options.fdLimit ? withFileLimit(options.fdLimit, command, args) : { command, args }), env: childEnv(env),
    cwd: options.cwd ?? ROOT, readyTimeoutMs: options.readyTimeoutMs ?? 90_000, keepOutput: options.keepOutput, onSpawn: options.onSpawn,
  };
  const child = await launch(logsReadyLine ? { ...spec, readyMsg: 'troupe listening' } : { ...spec, port });
  if (options.engine && child.readyInfo.engine !== options.engine) {
    await child.stop(5_000);
    throw new Error(`${name}: Troupe reports engine '${String(child.readyInfo.engine)}', not ${options.engine}`);
  }
  let seq = 0;
  return {
    child, key, base: `http://127.0.0.1:${child.port}`, auth: `Bearer ${key}`,
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
/** The Node flags `npm start` gives the server (the checkout's package.json), so benchmarks run Troupe as users do. */
async function startFlags(cwd: string): Promise<string[]> {
  const start = (JSON.parse(await readFile(join(cwd, 'package.json'), 'utf8')) as { scripts?: { start?: string } }).scripts?.start ?? '';
  return /\bnode ((?:--\S+ )*)src\/main\.ts/.exec(start)?.[1]?.split(' ').filter(Boolean) ?? [];
}
type Store = { env: Record<string, string>; dispose: () => Promise<void>; url?: string; dir?: string };
/** An empty store (a temporary PostgreSQL database or PGlite folder): Troupe's setting for it and how to remove it. */
export async function freshStore(backend: 'postgres' | 'pglite', databaseUrl: string): Promise<Store> {
  if (backend === 'postgres') {
    const db = await createTempDatabase(databaseUrl);
    return { env: { DATABASE_URL: db.url }, url: db.url, dispose: db.drop };
  }
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-store-'));
  return { env: { TROUPE_DATA_DIR: dir }, dir, dispose: () => rm(dir, { recursive: true, force: true }) };
}
/** Colyseus' process id in Troupe's output (its `actor system ready` line, logged at LOG_LEVEL info). */
export const colyseusProcessId = (output: string): string | null => /"processId":"([^"]+)"[^\n]*"msg":"actor system ready"/.exec(output)?.[1] ?? null;
/** Which Colyseus process runs each room (conversation) by Redis' room cache. */
export async function roomPlacement(redisUrl: string): Promise<Map<string, string>> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    return new Map(Object.entries(await redis.hgetall('roomcaches')).map(([roomId, json]) => [roomId, String((JSON.parse(json) as { processId?: unknown }).processId)]));
  } finally {
    redis.disconnect();
  }
}
export async function callJson<T = unknown>(api: Api, method: string, path: string, body: unknown, expected: number): Promise<T> {
  const headers = { authorization: api.auth, 'content-type': 'application/json' }; // JSON.stringify(undefined) is undefined: no body.
  const res = await fetch(`${api.base}${path}`, { method, headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: expected ${expected}, got ${res.status}: ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : null) as T;
}
/** `description` '' sends none. */
export async function createCharacter(api: Api, name = 'Bench', description = 'A gruff harbour master who hates pirates, used by the load tests.'): Promise<string> {
  const created = await callJson<{ id?: unknown }>(api, 'POST', '/characters', { name, ...(description ? { description } : {}) }, 201);
  if (typeof created.id !== 'string') throw new Error('POST /characters returned no id');
  return created.id;
}
export const createConversation = async (api: Api, characterId: string): Promise<string> =>
  (await callJson<{ id: string }>(api, 'POST', '/conversations', { characterId }, 201)).id;
export const postMessage = (api: Api, conversationId: string, content: string): Promise<unknown> =>
  callJson(api, 'POST', `/conversations/${conversationId}/messages`, { content }, 200);
/** A Node binary that can load uWebSockets.js: $UWS_NODE, else the last line `bash .ci/uws-node.sh` prints (it may build one). */
export async function uwsEngineNode(wanted: boolean, log: Log): Promise<{ path: string | null; note: string }> {
  if (!wanted) return { path: null, note: 'not requested' };
  let candidate = process.env.UWS_NODE?.trim() ?? '';
  const source = candidate ? 'UWS_NODE' : '.ci/uws-node.sh';
  try {
    const built = () => execFileAsync('bash', [join(ROOT, '.ci', 'uws-node.sh')], { cwd: ROOT, timeout: 10 * 60_000, maxBuffer: 1 << 20 });
    candidate ||= (await built()).stdout.trim().split('\n').at(-1)?.trim() ?? '';
    await execFileAsync(candidate, ['--input-type=commonjs', '-e', 'require("uWebSockets.js")'], { cwd: ROOT, timeout: 30_000 });
  } catch (err) {
    const e = err as Error & { stderr?: string; killed?: boolean };
    // The last "Error:" line is the root cause (typically "version `GLIBC_2.38' not found").
    const cause = e.stderr?.split('\n').filter((l) => /Error: |ERROR/.test(l)).at(-1) ?? e.message.split('\n')[0] ?? '?';
    const why = e.killed ? 'timed out' : cause.slice(0, 300);
    const note = candidate ? `${candidate} (from ${source}) cannot load uWebSockets.js: ${why}` : `.ci/uws-node.sh failed: ${why}`;
    log(`no uWS-capable node, uws skipped: ${note}`);
    return { path: null, note };
  }
  log(`uWS-capable node: ${candidate} (from ${source})`);
  return { path: candidate, note: `${candidate} (from ${source})` };
}
