/**
 * Part (b): chunk fan-out to the subscribers (WebSockets in this process) of one conversation, on
 * CLOCK_MONOTONIC: spread = last minus first subscriber's arrival per chunk; latency = arrival minus
 * the upstream's write (its stamp). One thread takes in every subscriber's message, so the spread is
 * an upper bound of Troupe's. Across processes the actor runs on A and the subscribers are on B.
 */
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { createTempDatabase } from '../../test/support/databases.ts';
import { delay } from '../support/children.ts';
import { startCpuWindow, type CpuWindow, type WatchedProcess } from '../support/proc.ts';
import { summarize } from '../support/report.ts';
import { callJson, colyseusProcessId, createCharacter, newBootstrapKey, roomPlacement, startTroupe, type Troupe, type TroupeOptions } from '../support/troupe.ts';
import { parseStamps, STAMP_PREFIX } from '../support/upstream-reply.ts';

export const wsUrl = (troupe: Troupe, conversationId: string): string => `${troupe.base.replace(/^http/, 'ws')}/conversations/${conversationId}/ws?token=${encodeURIComponent(troupe.key ?? "")}`;

export interface FanoutOptions {
  subscribers: number;
  messages: number;
  warmupMessages: number;
  /** Stamped chunks per reply and the gap between them (the upstream's settings). */
  chunks: number;
  gapMs: number;
  pauseMs: number;
  timeoutMs: number;
  watch: readonly WatchedProcess[];
  /** An existing conversation (default: a new one of `characterId`). */
  conversationId?: string;
  /** The Troupe the subscribers connect to (default: the one messages are posted on). */
  subscribeVia?: Troupe;
}

export type FanoutResult = Awaited<ReturnType<typeof runFanout>>;

interface Arrival {
  at: number;
  data: Buffer;
}

/** CLOCK_MONOTONIC µs as a float, cheap enough for the message handler. */
const nowMicros = (): number => Number(process.hrtime.bigint()) / 1000;

async function openSubscriber(url: string, timeoutMs: number, inbox: Arrival[][], index: number): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let ready = false;
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`subscriber ${index}: no ready within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.on('message', (data: Buffer) => {
      const at = nowMicros();
      if (!ready) {
        ready = true;
        clearTimeout(timer);
        if (!data.includes('"ready"')) reject(new Error(`subscriber ${index}: first message was ${data.toString('utf8').slice(0, 200)}`));
        else resolve(ws);
        return;
      }
      inbox[index]?.push({ at, data });
    });
    ws.on('error', (err: Error) => {
      clearTimeout(timer);
      reject(new Error(`subscriber ${index}: ${err.message}`));
    });
  });
}

export async function runFanout(troupe: Troupe, characterId: string, options: FanoutOptions, log: (line: string) => void) {
  const conversation = options.conversationId ? { id: options.conversationId } : await callJson<{ id: string }>(troupe, 'POST', '/conversations', { characterId }, 201);
  const subscribeVia = options.subscribeVia ?? troupe;
  const inbox: Arrival[][] = Array.from({ length: options.subscribers }, () => []);
  const sockets: WebSocket[] = [];
  const problems: string[] = [];
  const spread: number[] = [];
  const latency: number[] = [];
  const firstLatency: number[] = [];
  const lastLatency: number[] = [];
  const httpMs: number[] = [];
  let completeChunks = 0;
  let expected = 0;
  let missing = 0;
  let cpu: CpuWindow = { children: {}, bench: 0, benchEventLoop: 0, other: null, machine: null };
  try {
    for (let i = 0; i < options.subscribers; i++) sockets.push(await openSubscriber(wsUrl(subscribeVia, conversation.id), options.timeoutMs, inbox, i));
    let stopCpu: (() => CpuWindow) | null = null;
    const total = options.warmupMessages + options.messages;
    for (let m = 0; m < total; m++) {
      const measured = m >= options.warmupMessages;
      if (measured && stopCpu === null) stopCpu = startCpuWindow(options.watch);
      for (const box of inbox) box.length = 0;
      const t0 = performance.now();
      await callJson(troupe, 'POST', `/conversations/${conversation.id}/messages`, { content: `${STAMP_PREFIX} message ${m}` }, 200);
      const t1 = performance.now();
      // `done` goes out before the HTTP reply, but may not have arrived here yet.
      const deadline = Date.now() + options.timeoutMs;
      while (!inbox.every((box) => box.some((a) => a.data.includes('"done":true'))) && Date.now() < deadline) await delay(2);
      if (!measured) continue;
      httpMs.push(t1 - t0);
      // Per chunk index: arrival time (µs) at each subscriber and the upstream's write time.
      const arrivals = new Map<number, { written: number; at: number[] }>();
      inbox.forEach((box, s) => {
        let sawDone = false;
        for (const { at, data } of box) {
          const event = JSON.parse(data.toString('utf8')) as { type?: string; content?: string; done?: boolean };
          if (event.type !== 'chunk') {
            problems.push(`subscriber ${s} got a ${String(event.type)} event: ${data.toString('utf8').slice(0, 200)}`);
            continue;
          }
          if (event.done) sawDone = true;
          for (const stamp of parseStamps(event.content ?? '')) {
            const entry = arrivals.get(stamp.index) ?? { written: stamp.micros, at: [] };
            entry.at.push(at);
            arrivals.set(stamp.index, entry);
            latency.push((at - stamp.micros) / 1000);
          }
        }
        if (!sawDone) problems.push(`message ${m}: subscriber ${s} got no done chunk within ${options.timeoutMs} ms`);
      });
      expected += options.chunks * options.subscribers;
      for (let c = 0; c < options.chunks; c++) {
        const entry = arrivals.get(c);
        const got = entry?.at.length ?? 0;
        missing += Math.max(0, options.subscribers - got);
        if (!entry || got < options.subscribers) continue;
        completeChunks++;
        const first = Math.min(...entry.at);
        const last = Math.max(...entry.at);
        spread.push((last - first) / 1000);
        firstLatency.push((first - entry.written) / 1000);
        lastLatency.push((last - entry.written) / 1000);
      }
      await delay(options.pauseMs);
    }
    if (stopCpu) cpu = stopCpu();
  } finally {
    for (const ws of sockets) ws.terminate();
  }
  if (problems.length > 5) problems.splice(5, problems.length - 5, `… and more (${problems.length} problems in all)`);
  // Spread: last - first subscriber's arrival per chunk; latency: arrival - upstream write (ms).
  const result = {
    subscribers: options.subscribers, messages: options.messages, chunksPerMessage: options.chunks, gapMs: options.gapMs,
    completeChunks, expectedDeliveries: expected, missingDeliveries: missing, spreadMs: summarize(spread), latencyMs: summarize(latency),
    firstSubscriberLatencyMs: summarize(firstLatency), lastSubscriberLatencyMs: summarize(lastLatency), httpMessageMs: summarize(httpMs), cpu, problems,
  };
  log(
    `fan-out: ${completeChunks} chunks x ${options.subscribers} subscribers, spread p50/p99 ${result.spreadMs.p50.toFixed(3)}/${result.spreadMs.p99.toFixed(3)} ms, ` +
      `latency p50/p99 ${result.latencyMs.p50.toFixed(3)}/${result.latencyMs.p99.toFixed(3)} ms, missing ${missing}`,
  );
  return result;
}

export interface CrossOptions {
  troupe: TroupeOptions;
  /** Server to create the temporary database on, e.g. postgres://postgres@127.0.0.1:5432/test. */
  databaseUrl: string;
  redisUrl: string;
  fanout: Omit<FanoutOptions, 'conversationId' | 'subscribeVia' | 'watch'>;
  upstream: WatchedProcess;
  /** Waits for a quiet machine before measuring. */
  quiet: (watch: readonly WatchedProcess[]) => Promise<void>;
}

export interface CrossResult {
  fanout: FanoutResult;
  /** Where Redis' room cache says the actor runs, next to A's and B's Colyseus process ids. */
  placement: { actorProcessId: string | null; aProcessId: string | null; bProcessId: string | null; onA: boolean | null };
  troupeExits: Record<string, string>;
}

export async function runCrossProcessFanout(options: CrossOptions, log: (line: string) => void): Promise<CrossResult> {
  const db = await createTempDatabase(options.databaseUrl);
  const troupeExits: Record<string, string> = {};
  const shared = { ...options.troupe, keepOutput: true, settings: { ...options.troupe.settings, DATABASE_URL: db.url, REDIS_URL: options.redisUrl }, key: newBootstrapKey() };
  let a: Troupe | null = null;
  let b: Troupe | null = null;
  try {
    log(`fan-out across processes: database ${new URL(db.url).pathname.slice(1)}, Redis ${options.redisUrl}; starting A`);
    a = await startTroupe({ ...shared, name: `troupe-${shared.engine}-A` });
    const characterId = await createCharacter(a, 'Gate Guard');
    const conversation = await callJson<{ id: string }>(a, 'POST', '/conversations', { characterId }, 201);
    // Creates the conversation's actor on A, the only process so far.
    await callJson(a, 'POST', `/conversations/${conversation.id}/messages`, { content: `${STAMP_PREFIX} placement` }, 200);
    log('fan-out across processes: actor started on A; starting B');
    b = await startTroupe({ ...shared, name: `troupe-${shared.engine}-B` });
    const placement = { actorProcessId: (await roomPlacement(options.redisUrl)).get(conversation.id) ?? null, aProcessId: colyseusProcessId(a.child.output()), bProcessId: colyseusProcessId(b.child.output()), onA: null as boolean | null };
    if (placement.actorProcessId && placement.aProcessId) placement.onA = placement.actorProcessId === placement.aProcessId;
    if (placement.onA === false) throw new Error(`the conversation's actor runs on ${placement.actorProcessId}, not on A (${placement.aProcessId})`);
    const watch = [{ name: 'troupeA', pid: a.child.pid }, { name: 'troupeB', pid: b.child.pid }, options.upstream];
    await options.quiet(watch);
    const fanout = await runFanout(a, characterId, { ...options.fanout, conversationId: conversation.id, subscribeVia: b, watch }, log);
    return { fanout, placement, troupeExits };
  } finally {
    if (b) troupeExits.B = await b.stop(10_000);
    if (a) troupeExits.A = await a.stop(10_000);
    await db.drop().catch((err: unknown) => log(`could not drop ${db.url}: ${(err as Error).message}`));
  }
}
