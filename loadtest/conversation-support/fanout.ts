/**
 * Part (b): chunk fan-out to the subscribers (WebSockets in this process) of one conversation, on
 * CLOCK_MONOTONIC: spread = last minus first subscriber's arrival per chunk; latency = arrival minus
 * the upstream's write (its stamp). One thread takes in every subscriber's message, so the spread is
 * an upper bound of Troupe's. Across processes the actor runs on A and the subscribers are on B.
 */
import { performance } from 'node:perf_hooks';
import type { WebSocket } from 'ws';
import { delay, type Log } from '../support/children.ts';
import { NO_CPU, startCpuWindow, type CpuWindow, type WatchedProcess } from '../support/proc.ts';
import { summarize } from '../support/report.ts';
import { openReadySocket, wsUrl } from '../support/sockets.ts';
import * as api from '../support/troupe.ts';
import { parseStamps, STAMP_PREFIX } from '../support/upstream.ts';

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
  subscribeVia?: api.Troupe;
}

export type FanoutResult = Awaited<ReturnType<typeof runFanout>>;
type Arrival = { at: number; data: Buffer };

export async function runFanout(troupe: api.Troupe, characterId: string, options: FanoutOptions, log: Log) {
  const conversationId = options.conversationId ?? (await api.createConversation(troupe, characterId));
  const via = options.subscribeVia ?? troupe;
  const inbox: Arrival[][] = Array.from({ length: options.subscribers }, () => []);
  const sockets: WebSocket[] = [];
  const problems: string[] = [];
  const [spread, latency, firstLatency, lastLatency, httpMs]: [number[], number[], number[], number[], number[]] = [[], [], [], [], []];
  let [completeChunks, expected, missing] = [0, 0, 0];
  let cpu: CpuWindow = NO_CPU;
  try {
    for (const [i, box] of inbox.entries()) {
      const onMessage = (data: Buffer, at: number) => void box.push({ at, data });
      const url = wsUrl(via.base, conversationId, via.key);
      const ws = await openReadySocket(url, { timeoutMs: options.timeoutMs, onMessage }).catch((err: Error) => {
        const first = (err as { kind?: string }).kind === 'unexpected_first_message' ? 'first message was ' : '';
        throw new Error(`subscriber ${i}: ${first}${err.message}`);
      });
      sockets.push(ws);
    }
    let stopCpu: (() => CpuWindow) | null = null;
    for (let m = 0; m < options.warmupMessages + options.messages; m++) {
      const measured = m >= options.warmupMessages;
      if (measured && stopCpu === null) stopCpu = startCpuWindow(options.watch);
      for (const box of inbox) box.length = 0;
      const t0 = performance.now();
      await api.postMessage(troupe, conversationId, `${STAMP_PREFIX} message ${m}`);
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
        const [first, last] = [Math.min(...entry.at), Math.max(...entry.at)];
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
  const result = {
    subscribers: options.subscribers, messages: options.messages, chunksPerMessage: options.chunks, gapMs: options.gapMs,
    completeChunks, expectedDeliveries: expected, missingDeliveries: missing, spreadMs: summarize(spread), latencyMs: summarize(latency),
    firstSubscriberLatencyMs: summarize(firstLatency), lastSubscriberLatencyMs: summarize(lastLatency), httpMessageMs: summarize(httpMs),
    cpu, problems,
  };
  const [s, l] = [result.spreadMs, result.latencyMs];
  log(
    `fan-out: ${completeChunks} chunks x ${options.subscribers} subscribers, spread p50/p99 ${s.p50.toFixed(3)}/${s.p99.toFixed(3)} ms, ` +
      `latency p50/p99 ${l.p50.toFixed(3)}/${l.p99.toFixed(3)} ms, missing ${missing}`,
  );
  return result;
}

export interface CrossOptions {
  troupe: api.TroupeOptions;
  /** Server to create the temporary database on. */
  databaseUrl: string;
  redisUrl: string;
  fanout: Omit<FanoutOptions, 'conversationId' | 'subscribeVia' | 'watch'>;
  upstream: WatchedProcess;
  /** Waits for a quiet machine before measuring. */
  quiet: (watch: readonly WatchedProcess[]) => Promise<void>;
}

export type CrossResult = Awaited<ReturnType<typeof runCrossProcessFanout>>;

/** Two Troupe processes on one fresh PostgreSQL database and one Redis: the actor on A, the subscribers on B. */
export async function runCrossProcessFanout(options: CrossOptions, log: Log) {
  const store = await api.freshStore('postgres', options.databaseUrl);
  const troupeExits: Record<string, string> = {};
  const settings = { ...options.troupe.settings, ...store.env, REDIS_URL: options.redisUrl };
  const shared = { ...options.troupe, keepOutput: true, settings, key: api.newBootstrapKey() };
  let [a, b]: (api.Troupe | null)[] = [null, null];
  try {
    log(`fan-out across processes: database ${new URL(store.url ?? '').pathname.slice(1)}, Redis ${options.redisUrl}; starting A`);
    a = await api.startTroupe({ ...shared, name: `troupe-${shared.engine}-A` });
    const characterId = await api.createCharacter(a, 'Gate Guard');
    const conversationId = await api.createConversation(a, characterId);
    // Creates the conversation's actor on A, the only process so far.
    await api.postMessage(a, conversationId, `${STAMP_PREFIX} placement`);
    log('fan-out across processes: actor started on A; starting B');
    b = await api.startTroupe({ ...shared, name: `troupe-${shared.engine}-B` });
    const actorProcessId = (await api.roomPlacement(options.redisUrl)).get(conversationId) ?? null;
    const [aProcessId, bProcessId] = [a, b].map((t) => api.colyseusProcessId(t.child.output()));
    const placement = { actorProcessId, aProcessId: aProcessId ?? null, bProcessId: bProcessId ?? null, onA: null as boolean | null };
    if (actorProcessId && aProcessId) placement.onA = actorProcessId === aProcessId;
    if (placement.onA === false) throw new Error(`the conversation's actor runs on ${actorProcessId}, not on A (${aProcessId})`);
    const watch = [{ name: 'troupeA', pid: a.child.pid }, { name: 'troupeB', pid: b.child.pid }, options.upstream];
    await options.quiet(watch);
    const fanout = await runFanout(a, characterId, { ...options.fanout, conversationId, subscribeVia: b, watch }, log);
    return { fanout, placement, troupeExits };
  } finally {
    if (b) troupeExits.B = await b.stop(10_000);
    if (a) troupeExits.A = await a.stop(10_000);
    await store.dispose().catch((err: unknown) => log(`could not drop ${store.url}: ${(err as Error).message}`));
  }
}
