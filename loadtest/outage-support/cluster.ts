/**
 * One outage scenario's cluster: a fresh PostgreSQL database (optionally behind a fault proxy), a
 * private `redis-server`, the upstream in echo mode, and Troupe processes in slots A and B. `route`
 * is the load balancer's table: a slot out of rotation sends its traffic to the other.
 */
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { createTempDatabase } from '../../test/support/databases.ts';
import { startFaultProxy, type FaultProxy } from '../../test/support/fault-proxy.ts';
import { childEnv, freePort, ROOT, spawnTracked, type Tracked } from '../support/children.ts';
import { colyseusProcessId, startTroupe, type Troupe } from '../support/troupe.ts';
import { BENCH_MODEL, startUpstream } from '../support/upstream.ts';

export type Slot = 'A' | 'B';
export const SLOTS: readonly Slot[] = ['A', 'B'];
export const other = (slot: Slot): Slot => (slot === 'A' ? 'B' : 'A');

/** Databases to drop synchronously on an exit that skips `finally` (Ctrl-C, the time budget). */
const onExit = new Map<string, () => void>();
process.on('exit', () => onExit.forEach((drop) => drop()));

export interface ClusterOptions {
  databaseUrl: string;
  /** A fault proxy between Troupe and PostgreSQL. */
  proxyDatabase: boolean;
  engine: string;
  failoverMs: number;
  replyChunks: number;
  chunkDelayMs: number;
}

/** label: A1, B1, A2 (the second process of slot A)…; processId: Colyseus', from the `actor system ready` line. */
export type TroupeNode = { label: string; slot: Slot; troupe: Troupe; processId: string };

const KEY = 'sk-troupe-outagebench_key_00000000001';
export const gone = (node: TroupeNode): boolean => node.troupe.child.exitInfo() !== null;

export class Cluster {
  readonly key = KEY;
  readonly nodes: Record<Slot, TroupeNode | null> = { A: null, B: null };
  /** Every process started, in order (their logs are read at the end). */
  readonly all: TroupeNode[] = [];
  readonly route: Record<Slot, Slot> = { A: 'A', B: 'B' };
  readonly #closers: (() => Promise<unknown>)[] = [];
  #count: Record<Slot, number> = { A: 0, B: 0 };
  #settings: Record<string, string> = {};
  redis!: Awaited<ReturnType<typeof startRedis>>;
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
    this.#closers.push(() => db.drop().then(() => onExit.delete(name)));
    let databaseUrl = db.url;
    if (options.proxyDatabase) {
      const u = new URL(db.url);
      const proxy = (this.pgProxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) }));
      this.#closers.push(() => proxy.close());
      databaseUrl = proxy.via(db.url);
    }
    const upstream = await startUpstream({ BENCH_REPLY: 'echo', BENCH_REPLY_TOKENS: String(options.replyChunks),
      BENCH_REPLY_GAP_MS: String(options.chunkDelayMs) });
    this.#closers.push(() => upstream.stop());
    this.redis = await startRedis();
    this.#closers.push(() => this.redis.stop());
    this.#settings = {
      DATABASE_URL: databaseUrl, REDIS_URL: this.redis.url, HTTP_ENGINE: options.engine,
      INFERENCE_BASE_URL: `http://127.0.0.1:${upstream.port}/v1`,
      INFERENCE_MODEL: BENCH_MODEL, ACTOR_FAILOVER_MS: String(options.failoverMs),
    };
    // One first, so the other does not race it through the migrations of an empty database.
    await this.startSlot('A');
    await this.startSlot('B');
  }

  /** Starts the slot's next process and puts it back in rotation. */
  async startSlot(slot: Slot): Promise<TroupeNode> {
    const label = `${slot}${++this.#count[slot]}`;
    const troupe = await startTroupe({ name: `troupe-${label}`, key: KEY, settings: this.#settings, keepOutput: true });
    // Logged before `troupe listening`, so it is in the output already.
    const node: TroupeNode = { label, slot, troupe, processId: colyseusProcessId(troupe.child.output()) ?? '' };
    this.engine = String(troupe.child.readyInfo.engine);
    this.nodes[slot] = node;
    this.all.push(node);
    this.route[slot] = slot;
    return node;
  }

  /** The process traffic for `slot` goes to now, or null when it is gone. */
  target(slot: Slot): TroupeNode | null {
    return this.nodes[this.route[slot]];
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((node) => node.troupe.child.stop(0, 'SIGKILL')));
    const failed = (err: unknown) => process.stderr.write(`[outages] cleanup failed: ${String(err)}\n`);
    for (const close of this.#closers.reverse()) await close().catch(failed);
  }
}

/** A `redis-server` of its own, saving nothing; `restart` SIGKILLs it and starts it again empty on the same port. */
async function startRedis() {
  const port = await freePort();
  const start = () =>
    new Promise<Tracked>((resolve, reject) => {
      const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
      const onLine = (line: string) => line.includes('Ready to accept connections') && resolve(server);
      const server = spawnTracked({ name: 'redis', command: 'redis-server', args, env: childEnv({}), cwd: ROOT, onLine });
      void server.exited.then(() => reject(new Error(`redis-server exited:\n${server.tail()}`)));
    });
  let server = await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    async restart(): Promise<{ downMs: number }> {
      const t0 = performance.now();
      await server.stop(0, 'SIGKILL');
      server = await start();
      return { downMs: performance.now() - t0 };
    },
    stop: () => server.stop(0, 'SIGKILL'),
  };
}

function dropSync(baseUrl: string, name: string): void {
  const script = `import postgres from 'postgres'; const sql = postgres(${JSON.stringify(baseUrl)}, { max: 1, onnotice: () => {} }); ` +
    `await sql.unsafe('drop database if exists ${name} with (force)'); await sql.end();`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: 'ignore', timeout: 20_000 });
}
