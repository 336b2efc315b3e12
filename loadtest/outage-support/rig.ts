/**
 * An outage scenario's rig: a fresh PostgreSQL database (optionally behind a fault proxy), a private `redis-server`, the
 * upstream in echo mode, Troupe processes in slots A and B, and `route`, the balancer's table: the process each slot's traffic
 * goes to. Its load: per conversation, rounds of one message through each slot at once; a WebSocket per conversation and slot;
 * REST reads; `GET /readyz` polls. */
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { createTempDatabase } from '../../test/support/databases.ts';
import { startFaultProxy, type FaultProxy } from '../../test/support/fault-proxy.ts';
import { childEnv, freePort, parseJson, ROOT, spawnTracked, type Tracked } from '../support/children.ts';
import { wsUrl } from '../support/sockets.ts';
import { callJson, createCharacter, createConversation, startTroupe, type Troupe } from '../support/troupe.ts';
import { BENCH_MODEL, echoedMessage as replyTag, startUpstream } from '../support/upstream.ts';
import type { Settings } from '../outages.ts';

export type Slot = 'A' | 'B';
export const SLOTS: readonly Slot[] = ['A', 'B'];
/** label: A1, B1, A2 (slot A's second process)…; status null: no answer came; code: the error body's `code` or the connection
 * error's; tag: unique per message (c00-r0003-A), the echo reply names it; answeredTag: the tag the reply in its 200 answers. */
export type TroupeNode = { label: string; troupe: Troupe };
export type Outcome = { t0: number; t1: number; status: number | null; code: string | null; node: string };
export type Send = Outcome & { conv: number; round: number; via: Slot; tag: string; answeredTag: string | null };
export type Read = Outcome & { via: Slot; kind: 'conversation' | 'character' };
/** One socket: replies by replyId (`dones` > 1: a duplicate); doneOrder: replyIds in the order their `done` arrived. */
export type Session = { conv: number; tReady: number | null; tClose: number | null; errors: Record<string, number>;
  replies: Map<string, { text: string; tFirst: number; dones: number }>; doneOrder: string[] };
export type StoredMessage = { role: string; content: string };
type RigOptions = Settings & { proxyDatabase: boolean; failoverMs: number };
/** What an outcome is counted as: "200", "503 database_unavailable", "ECONNREFUSED"… */
export const outcome = (o: Outcome): string => (o.status === null ? String(o.code) : `${o.status} ${o.code ?? ''}`.trim());
export const bump = (counts: Record<string, number>, key: string, n = 1): void => void (counts[key] = (counts[key] ?? 0) + n);
const KEY = 'sk-troupe-outagebench_key_00000000001';
/** Databases (name: server URL) to drop on an exit that skips `finally` (Ctrl-C, the time budget): synchronously, by a child. */
const undropped = new Map<string, string>();
process.on('exit', () => undropped.forEach((baseUrl, name) => {
  const script = `import postgres from 'postgres'; const sql = postgres(${JSON.stringify(baseUrl)}, { max: 1, onnotice: () => {} }); ` +
    `await sql.unsafe('drop database if exists ${name} with (force)'); await sql.end();`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: 'ignore', timeout: 20_000 });
}));
export class Rig {
  readonly all: TroupeNode[] = [];
  readonly route = {} as Record<Slot, TroupeNode>;
  readonly conversations: string[] = [];
  readonly sends: Send[] = [];
  readonly reads: Read[] = [];
  readonly ready: { via: Slot; t: number; ok: boolean }[] = [];
  readonly sessions: Session[] = [];
  redis!: Awaited<ReturnType<typeof startRedis>>;
  pgProxy: FaultProxy | null = null;
  engine = '';
  characterId = '';
  readonly #closers: (() => Promise<unknown>)[] = [];
  readonly #tasks: Promise<void>[] = [];
  readonly #sockets = new Set<WebSocket>();
  #troupeSettings: Record<string, string> = {};
  #t0 = performance.now();
  #sending = true;
  #watching = true;
  #o!: RigOptions;
  /** Starts everything but the load; `close` undoes what was started, also after a failure. */
  async start(o: RigOptions): Promise<void> {
    this.#o = o;
    const db = await createTempDatabase(o.databaseUrl);
    const name = new URL(db.url).pathname.slice(1);
    undropped.set(name, o.databaseUrl);
    this.#closers.push(() => db.drop().then(() => undropped.delete(name)));
    let databaseUrl = db.url;
    if (o.proxyDatabase) {
      const u = new URL(db.url);
      const proxy = (this.pgProxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) }));
      this.#closers.push(() => proxy.close());
      databaseUrl = proxy.via(db.url);
    }
    const reply = { BENCH_REPLY: 'echo', BENCH_REPLY_TOKENS: `${o.replyChunks}`, BENCH_REPLY_GAP_MS: `${o.chunkDelayMs}` };
    const upstream = await startUpstream(reply);
    this.#closers.push(() => upstream.stop());
    const redis = (this.redis = await startRedis());
    this.#closers.push(() => redis.stop());
    this.#troupeSettings = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, HTTP_ENGINE: o.engine,
      INFERENCE_BASE_URL: `http://127.0.0.1:${upstream.port}/v1`, INFERENCE_MODEL: BENCH_MODEL, ACTOR_FAILOVER_MS: String(o.failoverMs) };
    // One first, so the other does not race it through the migrations of an empty database.
    await this.startSlot('A');
    await this.startSlot('B');
    this.characterId = await createCharacter(this.route.A.troupe, 'Warden', '');
    for (let i = 0; i < o.conversations; i++) this.conversations.push(await createConversation(this.route.A.troupe, this.characterId));
  }
  /** Starts the slot's next process and puts it back in rotation. */
  async startSlot(slot: Slot): Promise<TroupeNode> {
    const label = `${slot}${this.all.filter((n) => n.label.startsWith(slot)).length + 1}`;
    const troupe = await startTroupe({ name: `troupe-${label}`, key: KEY, settings: this.#troupeSettings, keepOutput: true });
    const node: TroupeNode = { label, troupe };
    this.engine = String(troupe.child.readyInfo.engine);
    this.all.push(node);
    this.route[slot] = node;
    return node;
  }
  now = (): number => performance.now() - this.#t0;
  /** Sends in flight right now to `node` (by label). */
  inFlight = (node: string): Send[] => this.sends.filter((s) => s.node === node && s.t1 < 0);
  startLoad(): void {
    this.#t0 = performance.now();
    const convs = this.conversations.map((_, conv) => conv);
    this.#tasks.push(...convs.map((conv) => this.#converse(conv)));
    for (const via of SLOTS) this.#tasks.push(...convs.map((conv) => this.#listen(conv, via)), this.#readLoop(via), this.#readyLoop(via));
  }
  /** Stops sending; waits for every message in flight, then `graceMs` for sockets to get the last events, then closes them. */
  async stop(graceMs: number): Promise<void> {
    if (!this.#watching) return;
    this.#sending = false;
    while (this.sends.some((s) => s.t1 < 0)) await sleep(50);
    await sleep(graceMs);
    this.#watching = false;
    for (const ws of this.#sockets) ws.close();
    await Promise.all(this.#tasks);
  }
  async close(): Promise<void> {
    await Promise.all(this.all.map((node) => node.troupe.child.stop(0, 'SIGKILL')));
    await this.stop(0); // after a failure: every request fails fast once the processes are gone
    const failed = (err: unknown) => process.stderr.write(`[outages] cleanup failed: ${String(err)}\n`);
    for (const close of this.#closers.reverse()) await close().catch(failed);
  }
  /** A conversation's stored history, read through whichever process answers. */
  async history(id: string): Promise<StoredMessage[]> {
    for (let attempt = 0; attempt < 60; attempt++) {
      for (const node of this.all.filter((n) => n.troupe.child.exitInfo() === null)) {
        const got = await callJson<{ messages: StoredMessage[] }>(node.troupe, 'GET', `/conversations/${id}`, undefined, 200)
          .catch(() => null);
        if (got) return got.messages;
      }
      await sleep(500);
    }
    throw new Error(`could not read conversation ${id}`);
  }
  async #request(via: Slot, method: string, path: string, body?: unknown): Promise<Outcome & { body: unknown }> {
    const node = this.route[via];
    const t0 = this.now();
    try {
      const headers = { authorization: `Bearer ${KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) };
      const signal = AbortSignal.timeout(this.#o.requestTimeoutMs);
      const res = await fetch(node.troupe.base + path, { method, headers, body: body ? JSON.stringify(body) : undefined, signal });
      const parsed = parseJson(await res.text()); // not JSON: the status says enough
      const code = res.status === 200 ? null : String((parsed?.error as { code?: unknown } | undefined)?.code ?? res.status);
      return { t0, t1: this.now(), status: res.status, code, node: node.label, body: parsed };
    } catch (err) {
      const e = err as Error & { cause?: { code?: unknown } };
      const code = e.name === 'TimeoutError' || e.name === 'AbortError' ? 'timeout' : String(e.cause?.code ?? e.message ?? err);
      return { t0, t1: this.now(), status: null, code, node: node.label, body: null };
    }
  }
  async #converse(conv: number): Promise<void> {
    // Spread out, so the conversations do not move in step (and a fault finds some of each in flight).
    const think = () => sleep(this.#o.thinkMs * (0.5 + Math.random()));
    await think();
    for (let round = 0; this.#sending; round++) {
      const sendOne = async (via: Slot) => {
        const tag = `c${String(conv).padStart(2, '0')}-r${String(round).padStart(4, '0')}-${via}`;
        const send: Send = { conv, round, via, tag, answeredTag: null, t0: this.now(), t1: -1, status: null, code: null,
          node: this.route[via].label };
        this.sends.push(send);
        const { body, ...out } = await this.#request(via, 'POST', `/conversations/${this.conversations[conv]}/messages`, { content: tag });
        const reply = (body as { characterMessage?: { content?: unknown } } | null)?.characterMessage?.content;
        Object.assign(send, out, { answeredTag: typeof reply === 'string' ? replyTag(reply) : null });
      };
      await Promise.all(SLOTS.map(sendOne));
      await think();
    }
  }
  async #readLoop(via: Slot): Promise<void> {
    let pending = 0;
    for (let n = 0; this.#watching && this.#o.readRate > 0; n++) {
      const kind = n % 2 === 0 ? 'conversation' : 'character';
      const id = kind === 'conversation' ? this.conversations[n % this.conversations.length] : this.characterId;
      if (pending < 50) {
        pending++;
        this.#tasks.push(this.#request(via, 'GET', `/${kind}s/${id}`).then(({ body: _body, ...out }) => {
          pending--;
          this.reads.push({ ...out, via, kind });
        }));
      }
      await sleep(1000 / this.#o.readRate);
    }
  }
  async #readyLoop(via: Slot): Promise<void> {
    while (this.#watching) {
      const out = await this.#request(via, 'GET', '/readyz');
      this.ready.push({ via, t: out.t1, ok: out.status === 200 });
      await sleep(100);
    }
  }
  /** One socket per conversation and slot, for as long as the load runs, reconnecting after a close. */
  async #listen(conv: number, via: Slot): Promise<void> {
    while (this.#watching) {
      const node = this.route[via];
      const session: Session = { conv, tReady: null, tClose: null, errors: {}, replies: new Map(), doneOrder: [] };
      const ws = new WebSocket(wsUrl(node.troupe.base, this.conversations[conv] as string, KEY));
      this.#sockets.add(ws);
      ws.once('open', () => this.sessions.push(session));
      ws.on('message', (data) => {
        const t = this.now();
        const event = JSON.parse(String(data)) as Record<string, unknown>;
        if (event.type === 'ready') session.tReady = t;
        if (event.type === 'error') bump(session.errors, String(event.code ?? 'error'));
        const id = event.replyId;
        if (event.type !== 'chunk' || typeof id !== 'string') return;
        const reply = session.replies.get(id) ?? session.replies.set(id, { text: '', tFirst: t, dones: 0 }).get(id)!;
        reply.text += String(event.content ?? '');
        if (event.done !== true) return;
        reply.dones++;
        session.doneOrder.push(id);
      });
      ws.on('error', () => {}); // 'close' follows
      await new Promise((resolve) => ws.once('close', resolve));
      session.tClose = this.now();
      this.#sockets.delete(ws);
      if (this.#watching) await sleep(this.sessions.includes(session) ? 100 : 250); // longer after a failed connection
    }
  }
}
/** A `redis-server` of its own, saving nothing; `restart` SIGKILLs it, starts it again empty on the same port: ms down. */
async function startRedis() {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const start = () => new Promise<Tracked>((resolve, reject) => {
    const onLine = (line: string) => line.includes('Ready to accept connections') && resolve(server);
    const server = spawnTracked({ name: 'redis', command: 'redis-server', args, env: childEnv({}), cwd: ROOT, onLine });
    void server.exited.then(() => reject(new Error(`redis-server exited:\n${server.tail()}`)));
  });
  let server = await start();
  const stop = () => server.stop(0, 'SIGKILL');
  const restart = async () => {
    const t0 = performance.now();
    await stop();
    server = await start();
    return performance.now() - t0;
  };
  return { url: `redis://127.0.0.1:${port}`, stop, restart };
}
