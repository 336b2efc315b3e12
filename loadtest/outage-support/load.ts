/**
 * The load kept up through a fault: per conversation, rounds of two messages at once, one through
 * each slot (the next round once both answered); one WebSocket per conversation and slot,
 * reconnecting; REST reads at a fixed rate; `GET /readyz` every 100 ms. Times: ms since `now()` began.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { parseJson } from '../support/children.ts';
import { echoedMessage as replyTag } from '../support/upstream.ts';
import { wsUrl } from '../support/sockets.ts';
import { SLOTS, type Cluster, type Slot } from './cluster.ts';

/** The player message of conversation `conv`, round `round`, sent through `slot`: each is unique, and the echo reply names it. */
export const messageTag = (conv: number, round: number, slot: string): string =>
  `c${String(conv).padStart(2, '0')}-r${String(round).padStart(4, '0')}-${slot}`;

export function parseTag(tag: string): { conv: number; round: number; slot: string } | null {
  const m = /^c(\d+)-r(\d+)-([AB])$/.exec(tag);
  return m ? { conv: Number(m[1]), round: Number(m[2]), slot: String(m[3]) } : null;
}

export interface LoadOptions {
  conversations: string[];
  characterId: string;
  thinkMs: number;
  requestTimeoutMs: number;
  /** REST reads per second on each slot. */
  readRate: number;
}

/**
 * status: HTTP status, or null when no answer came; code: the error body's `code`, or the connection
 * error's (ECONNREFUSED, timeout, …); node: the process it went to (A1, B2…), null when its slot had none.
 */
export type Outcome = { t0: number; t1: number; status: number | null; code: string | null; node: string | null };
/** answeredTag: the tag the reply in the 200 body answers. */
export type Send = Outcome & { conv: number; round: number; via: Slot; tag: string; answeredTag: string | null };
export type Read = Outcome & { via: Slot; kind: 'conversation' | 'character' };
/** dones: when each `done` arrived (more than one is a duplicate). */
export type ReplySeen = { replyId: string; text: string; chunks: number; tFirst: number; dones: number[]; error: string | null };

export interface Session {
  conv: number;
  via: Slot;
  node: string;
  tReady: number | null;
  tClose: number | null;
  closeCode: number | null;
  replies: Map<string, ReplySeen>;
  /** replyIds in the order their `done` arrived. */
  doneOrder: string[];
  errors: Record<string, number>;
  events: number;
}

export class Load {
  readonly sends: Send[] = [];
  readonly reads: Read[] = [];
  readonly ready: { via: Slot; node: string | null; t: number; ok: boolean }[] = [];
  readonly sessions: Session[] = [];
  readonly #cluster: Cluster;
  readonly #options: LoadOptions;
  readonly #started = performance.now();
  readonly #tasks: Promise<void>[] = [];
  readonly #sockets = new Set<WebSocket>();
  #sending = true;
  #watching = true;
  constructor(cluster: Cluster, options: LoadOptions) {
    this.#cluster = cluster;
    this.#options = options;
  }

  /** The id of conversation number `conv`. */
  conversationId(conv: number): string {
    return this.#options.conversations[conv] as string;
  }

  now(): number {
    return performance.now() - this.#started;
  }

  start(): void {
    this.#options.conversations.forEach((_, conv) => {
      this.#tasks.push(this.#converse(conv));
      for (const via of SLOTS) this.#tasks.push(this.#listen(conv, via));
    });
    for (const via of SLOTS) this.#tasks.push(this.#readLoop(via), this.#readyLoop(via));
  }

  /** Sends in flight right now through `node` (by label). */
  inFlight(node: string): Send[] {
    return this.sends.filter((s) => s.node === node && s.t1 < 0);
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

  async #request(via: Slot, method: string, path: string, body?: unknown): Promise<Outcome & { body: unknown }> {
    const node = this.#cluster.target(via);
    const t0 = this.now();
    if (!node) return { t0, t1: t0, status: null, code: 'no_process', node: null, body: null };
    try {
      const res = await fetch(node.troupe.base + path, {
        method,
        headers: { authorization: `Bearer ${this.#cluster.key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(this.#options.requestTimeoutMs),
      });
      // Not JSON: the status says enough.
      const parsed = parseJson(await res.text());
      const code = res.status === 200 ? null : String((parsed as { error?: { code?: unknown } } | null)?.error?.code ?? res.status);
      return { t0, t1: this.now(), status: res.status, code, node: node.label, body: parsed };
    } catch (err) {
      return { t0, t1: this.now(), status: null, code: errorCode(err), node: node.label, body: null };
    }
  }

  async #converse(conv: number): Promise<void> {
    const id = this.#options.conversations[conv] as string;
    // Spread out, so the conversations do not move in step (and a fault finds some of each in flight).
    const think = () => this.#options.thinkMs * (0.5 + Math.random());
    await sleep(think());
    for (let round = 0; this.#sending; round++) {
      await Promise.all(
        SLOTS.map(async (via) => {
          const tag = messageTag(conv, round, via);
          const send: Send = { conv, round, via, tag, answeredTag: null, t0: this.now(), t1: -1, status: null, code: null,
            node: this.#cluster.target(via)?.label ?? null };
          this.sends.push(send);
          const out = await this.#request(via, 'POST', `/conversations/${id}/messages`, { content: tag });
          const reply = (out.body as { characterMessage?: { content?: unknown } } | null)?.characterMessage?.content;
          Object.assign(send, { t0: out.t0, t1: out.t1, status: out.status, code: out.code, node: out.node,
            answeredTag: typeof reply === 'string' ? replyTag(reply) : null });
        }),
      );
      await sleep(think());
    }
  }

  async #readLoop(via: Slot): Promise<void> {
    const { conversations, characterId, readRate } = this.#options;
    if (readRate <= 0) return;
    const pending = new Set<Promise<void>>();
    for (let n = 0; this.#watching; n++) {
      const kind = n % 2 === 0 ? 'conversation' : 'character';
      const path = kind === 'conversation' ? `/conversations/${conversations[n % conversations.length]}` : `/characters/${characterId}`;
      if (pending.size < 50) {
        const task = this.#request(via, 'GET', path).then((out) => void this.reads.push({ ...out, body: undefined, via, kind } as Read));
        pending.add(task);
        void task.finally(() => pending.delete(task));
      }
      await sleep(1000 / readRate);
    }
    await Promise.all(pending);
  }

  async #readyLoop(via: Slot): Promise<void> {
    while (this.#watching) {
      const out = await this.#request(via, 'GET', '/readyz');
      this.ready.push({ via, node: out.node, t: out.t1, ok: out.status === 200 });
      await sleep(100);
    }
  }

  /** One socket per conversation and slot, for as long as the load runs, reconnecting after a close. */
  async #listen(conv: number, via: Slot): Promise<void> {
    const id = this.#options.conversations[conv] as string;
    while (this.#watching) {
      const node = this.#cluster.target(via);
      if (!node) {
        await sleep(250);
        continue;
      }
      const session: Session = { conv, via, node: node.label, tReady: null, tClose: null, closeCode: null, replies: new Map(),
        doneOrder: [], errors: {}, events: 0 };
      const ws = new WebSocket(wsUrl(node.troupe.base, id, this.#cluster.key));
      this.#sockets.add(ws);
      ws.on('message', (data) => this.#record(session, JSON.parse(String(data)) as Record<string, unknown>));
      const opened = await new Promise<boolean>((resolve) => {
        let open = false;
        ws.once('open', () => {
          open = true;
          this.sessions.push(session);
        });
        ws.on('error', () => {}); // 'close' follows
        ws.once('close', (code) => {
          if (open) Object.assign(session, { closeCode: code, tClose: this.now() });
          resolve(open);
        });
      });
      this.#sockets.delete(ws);
      if (this.#watching) await sleep(opened ? 100 : 250);
    }
  }

  #record(session: Session, event: Record<string, unknown>): void {
    const t = this.now();
    session.events++;
    if (event.type === 'ready') session.tReady = t;
    const replyId = typeof event.replyId === 'string' ? event.replyId : null;
    if (event.type === 'error') {
      const code = String(event.code ?? 'error');
      session.errors[code] = (session.errors[code] ?? 0) + 1;
      const reply = replyId ? session.replies.get(replyId) : undefined;
      if (reply) reply.error = code;
      return;
    }
    if (event.type !== 'chunk' || !replyId) return;
    let reply = session.replies.get(replyId);
    if (!reply) {
      reply = { replyId, text: '', chunks: 0, tFirst: t, dones: [], error: null };
      session.replies.set(replyId, reply);
    }
    reply.text += String(event.content ?? '');
    reply.chunks++;
    if (event.done === true) {
      reply.dones.push(t);
      session.doneOrder.push(replyId);
    }
  }
}

function errorCode(err: unknown): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  const cause = (err as { cause?: { code?: unknown } } | null)?.cause;
  return String(cause?.code ?? (err as Error)?.message ?? err);
}
