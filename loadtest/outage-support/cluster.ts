/**
 * What one outage scenario runs on: a fresh PostgreSQL database (optionally behind a fault
 * proxy), a private `redis-server` on a free port (restartable empty), the test suite's fake
 * upstream, and two Troupe processes (slots A and B) sharing both. A slot's process can be
 * killed, stopped and started again; `route` is the load balancer's table (a slot taken out of
 * rotation sends its traffic to the other one). Everything started is stopped by `close`, and
 * by an exit hook if the run dies first.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { createTempDatabase } from '../../test/support/databases.ts';
import { startFaultProxy, type FaultProxy } from '../../test/support/fault-proxy.ts';
import { startFakeUpstream, type FakeUpstream } from '../../test/support/openai/fake-upstream.ts';
import { trackChild } from '../../test/support/leftovers.ts';
import { spawnTroupe, type TroupeProcess } from '../../test/support/process.ts';
import { replyFor } from './wire.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

export type Slot = 'A' | 'B';
export const SLOTS: readonly Slot[] = ['A', 'B'];
export const other = (slot: Slot): Slot => (slot === 'A' ? 'B' : 'A');

/** Synchronous last-resort cleanups for exits that skip `finally` (Ctrl-C, the time budget). */
const onExit = new Map<string, () => void>();
process.on('exit', () => {
  for (const cleanup of onExit.values()) {
    try {
      cleanup();
    } catch {
      // best effort on the way out
    }
  }
});

export interface ClusterOptions {
  /** PostgreSQL server where the temporary database is made (and dropped). */
  databaseUrl: string;
  /** Put a fault proxy between Troupe and PostgreSQL. */
  proxyDatabase: boolean;
  engine: string;
  failoverMs: number;
  replyChunks: number;
  chunkDelayMs: number;
  /** Extra Troupe settings. */
  env?: Record<string, string>;
}

export interface TroupeNode {
  /** A1, B1, A2 (the second process of slot A)… */
  label: string;
  slot: Slot;
  proc: TroupeProcess;
  /** Colyseus' process id, from the `actor system ready` line. */
  processId: string;
}

const KEY = 'sk-troupe-outagebench_key_00000000001';

export class Cluster {
  readonly key = KEY;
  readonly nodes: Record<Slot, TroupeNode | null> = { A: null, B: null };
  /** Every process started, in order (their logs are read at the end). */
  readonly all: TroupeNode[] = [];
  /** The load balancer: where traffic meant for a slot goes. */
  readonly route: Record<Slot, Slot> = { A: 'A', B: 'B' };
  readonly #closers: (() => Promise<void>)[] = [];
  #count: Record<Slot, number> = { A: 0, B: 0 };
  #env: Record<string, string> = {};
  upstream!: FakeUpstream;
  redis!: PrivateRedis;
  pgProxy: FaultProxy | null = null;
  engine = '';

  static async start(options: ClusterOptions): Promise<Cluster> {
    const cluster = new Cluster();
    try {
      await cluster.#start(options);
      return cluster;
    } catch (err) {
      await cluster.close();
      throw err;
    }
  }

  async #start(options: ClusterOptions): Promise<void> {
    const db = await createTempDatabase(options.databaseUrl);
    const name = new URL(db.url).pathname.slice(1);
    onExit.set(name, () => dropSync(options.databaseUrl, name));
    this.#closers.push(async () => {
      await db.drop();
      onExit.delete(name);
    });
    let databaseUrl = db.url;
    if (options.proxyDatabase) {
      const u = new URL(db.url);
      const proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
      this.pgProxy = proxy;
      this.#closers.push(() => proxy.close());
      databaseUrl = proxy.via(db.url);
    }
    const { replyChunks, chunkDelayMs } = options;
    const upstream = await startFakeUpstream({ defaultReply: (body) => ({ text: replyFor(body, replyChunks), chunkDelayMs }) });
    this.upstream = upstream;
    this.#closers.push(() => upstream.close());
    this.redis = await startRedis();
    this.#closers.push(() => this.redis.stop());
    this.#env = {
      DATABASE_URL: databaseUrl,
      REDIS_URL: this.redis.url,
      HTTP_ENGINE: options.engine,
      LOG_LEVEL: 'info',
      TROUPE_BOOTSTRAP_KEY: KEY,
      INFERENCE_BASE_URL: upstream.url,
      INFERENCE_MODEL: 'fake-chat-1',
      ACTOR_FAILOVER_MS: String(options.failoverMs),
      ...options.env,
    };
    // One first, so the other does not race it through the migrations of an empty database.
    await this.startSlot('A');
    await this.startSlot('B');
  }

  /** Starts the slot's next process and puts it back in rotation. */
  async startSlot(slot: Slot): Promise<TroupeNode> {
    const proc = await spawnTroupe(this.#env);
    const [, processId = ''] = await proc.waitForOutput(/"processId":"([^"]+)"[^\n]*"msg":"actor system ready"/);
    this.engine = (/"engine":"(\w+)"[^\n]*"msg":"troupe listening"/.exec(proc.stdout()) ?? [])[1] ?? '?';
    const node: TroupeNode = { label: `${slot}${++this.#count[slot]}`, slot, proc, processId };
    this.nodes[slot] = node;
    this.all.push(node);
    this.route[slot] = slot;
    return node;
  }

  /** The base URL traffic for `slot` goes to now, or null when that process is gone. */
  target(slot: Slot): TroupeNode | null {
    return this.nodes[this.route[slot]];
  }

  /** Which process runs each conversation's actor, by Colyseus process id (Redis' room cache). */
  async placement(): Promise<Map<string, string>> {
    const redis = new Redis(this.redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await redis.connect();
      const rooms = await redis.hgetall('roomcaches');
      return new Map(Object.entries(rooms).map(([roomId, json]) => [roomId, String((JSON.parse(json) as { processId?: unknown }).processId)]));
    } finally {
      redis.disconnect();
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((node) => node.proc.stop('SIGKILL')));
    for (const close of this.#closers.reverse()) await close().catch((err: unknown) => process.stderr.write(`[outages] cleanup failed: ${String(err)}\n`));
  }
}

export interface PrivateRedis {
  url: string;
  /** SIGKILL, then start again empty on the same port; resolves once it accepts connections. */
  restart(): Promise<{ downMs: number }>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A `redis-server` of its own, saving nothing, as test/e2e/failover.test.ts starts one. */
export async function startRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let server: ChildProcess | null = null;
  const start = async () => {
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'ignore'] });
    server = child;
    trackChild(child);
    let out = '';
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('Ready to accept connections')) resolve();
      });
      child.once('exit', () => reject(new Error(`redis-server exited:\n${out}`)));
    });
  };
  const kill = async () => {
    const child = server;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    async restart() {
      const t0 = performance.now();
      await kill();
      await start();
      return { downMs: performance.now() - t0 };
    },
    stop: kill,
  };
}

function dropSync(baseUrl: string, name: string): void {
  const script = `import postgres from 'postgres'; const sql = postgres(${JSON.stringify(baseUrl)}, { max: 1, onnotice: () => {} }); await sql.unsafe('drop database if exists ${name} with (force)'); await sql.end();`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: 'ignore', timeout: 20_000 });
}
