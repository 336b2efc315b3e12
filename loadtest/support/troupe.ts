/**
 * Starts Troupe (src/main.ts) as a child for a benchmark: 127.0.0.1, a port of its own, an
 * in-memory database unless `settings` say otherwise, a fresh bootstrap key, and an environment
 * built only from what is passed here (troupe-env.ts). Below LOG_LEVEL=info Troupe does not log
 * the line with its port, so the port is chosen up front and /healthz polled instead.
 */
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, type Launched } from './children.ts';
import { freePort, launchPolled } from './polled-child.ts';
import { troupeEnv } from './troupe-env.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export type Engine = 'node' | 'uws';

export interface TroupeOptions {
  engine: Engine;
  /** A Node that can load uWebSockets.js when engine is uws (support/run.ts uwsEngineNode). */
  nodeBinary?: string;
  logLevel?: string;
  /** Upstream base URL (`http://127.0.0.1:P/v1`) and model, when the bench has one. */
  upstream?: { url: string; model: string };
  /** More of Troupe's variables (DATABASE_URL, REDIS_URL, ...), the only other ones it gets. */
  settings?: Record<string, string>;
  /** Node flags before src/main.ts (--cpu-prof, --import a probe, ...). */
  nodeArgs?: readonly string[];
  /** Bootstrap key; processes sharing a database share one. */
  key?: string;
  name?: string;
  readyTimeoutMs?: number;
  /** Rewrites the command line, e.g. to raise `ulimit -n` first (conversation-support/proc.ts). */
  wrap?: (command: string, args: string[]) => { command: string; args: string[] };
}

export interface Troupe {
  child: Launched;
  key: string;
  /** `http://127.0.0.1:<port>` */
  base: string;
  auth: string;
}

export function newBootstrapKey(): string {
  return `sk-troupe-bench${randomBytes(12).toString('base64url')}`;
}

export async function startTroupe(options: TroupeOptions): Promise<Troupe> {
  const key = options.key ?? newBootstrapKey();
  const logLevel = options.logLevel ?? 'info';
  const name = options.name ?? `troupe-${options.engine}`;
  const port = await freePort();
  const env = troupeEnv({
    PORT: String(port),
    HOST: '127.0.0.1',
    HTTP_ENGINE: options.engine,
    ...(options.settings?.DATABASE_URL ? {} : { TROUPE_DATA_DIR: 'memory://' }),
    TROUPE_BOOTSTRAP_KEY: key,
    LOG_LEVEL: logLevel,
    ...(options.upstream ? { INFERENCE_BASE_URL: options.upstream.url, INFERENCE_MODEL: options.upstream.model, INFERENCE_MAX_RETRIES: '0' } : {}),
    ...options.settings,
  });
  const plain = { command: options.nodeBinary ?? process.execPath, args: [...(options.nodeArgs ?? []), 'src/main.ts'] };
  const spec = {
    name,
    ...(options.wrap ? options.wrap(plain.command, plain.args) : plain),
    env,
    cwd: ROOT,
    readyTimeoutMs: options.readyTimeoutMs ?? 90_000,
  };
  const logsReadyLine = ['info', 'debug', 'trace'].includes(logLevel);
  const child = logsReadyLine ? await launch({ ...spec, readyMsg: 'troupe listening' }) : await launchPolled({ ...spec, port });
  if (child.readyInfo.engine !== options.engine) {
    await child.stop(5_000);
    throw new Error(`${name}: Troupe reports engine '${String(child.readyInfo.engine)}', not ${options.engine}`);
  }
  return { child, key, base: `http://127.0.0.1:${child.port}`, auth: `Bearer ${key}` };
}

/** A JSON request to Troupe that must answer `expected`; its parsed body. */
export async function callJson(troupe: Troupe, method: string, path: string, body: unknown, expected: number): Promise<unknown> {
  const res = await fetch(`${troupe.base}${path}`, {
    method,
    headers: { authorization: troupe.auth, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (res.status !== expected) throw new Error(`${method} ${path}: expected ${expected}, got ${res.status}: ${text.slice(0, 300)}`);
  return text ? (JSON.parse(text) as unknown) : null;
}

/** Creates a character and returns its id. */
export async function createCharacter(troupe: Troupe, name = 'Bench'): Promise<string> {
  const created = (await callJson(troupe, 'POST', '/characters', { name, description: 'A gruff harbour master who hates pirates, used by the load tests.' }, 201)) as { id?: unknown };
  if (typeof created.id !== 'string') throw new Error('POST /characters returned no id');
  return created.id;
}
