/**
 * Part (b): chunk fan-out to the subscribers of one conversation. `subscribers` WebSockets (in
 * this process) join one conversation; messages are posted over HTTP; the upstream streams
 * stamped chunks (see support/upstream-reply.ts). For every chunk we record when each subscriber received it,
 * timestamping in the `message` handler before anything else (parsing waits until the message
 * is over), and derive:
 *   - spread: last subscriber's arrival minus the first's, per chunk;
 *   - latency: arrival minus the instant the upstream wrote the chunk, per chunk and subscriber
 *     (upstream -> Troupe's SDK stream -> the conversation's actor -> its presence channel ->
 *     ConversationEvents of the subscribers' process -> socket -> this process), both on
 *     CLOCK_MONOTONIC.
 * In one process the presence channel is in memory. With `subscribeVia`, messages are posted on
 * one Troupe (where the caller made the conversation's actor run) and the subscribers connect to
 * another, so every event crosses Redis pub/sub between the two.
 * The subscribers share this process's one thread, so the spread includes the time this process
 * needs to take in N-1 messages (a few µs each): it is an upper bound of Troupe's own spread.
 */
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { startCpuWindow, type CpuWindow, type WatchedProcess } from '../support/cpu.ts';
import { summarize, type Summary } from '../support/stats.ts';
import { delay } from '../support/children.ts';
import { api, wsUrl, type Troupe } from './troupe.ts';
import { parseStamps, STAMP_PREFIX } from '../support/upstream-reply.ts';

export interface FanoutOptions {
  subscribers: number;
  messages: number;
  warmupMessages: number;
  /** Stamped chunks per reply (what the upstream is configured to send). */
  chunks: number;
  /** Gap between chunks at the upstream, for the report. */
  gapMs: number;
  pauseMs: number;
  timeoutMs: number;
  watch: readonly WatchedProcess[];
  /** An existing conversation (default: a new one of `characterId`). */
  conversationId?: string;
  /** The Troupe the subscribers connect to (default: the one messages are posted on). */
  subscribeVia?: Troupe;
}

export interface FanoutResult {
  subscribers: number;
  messages: number;
  chunksPerMessage: number;
  gapMs: number;
  /** Chunks every subscriber received (the spread's sample count). */
  completeChunks: number;
  /** Chunk deliveries expected and missing (a subscriber never got it). */
  expectedDeliveries: number;
  missingDeliveries: number;
  /** Per chunk: last subscriber's arrival - first subscriber's arrival (ms). */
  spreadMs: Summary;
  /** Per chunk and subscriber: arrival - upstream write (ms). */
  latencyMs: Summary;
  /** Per chunk: arrival at the first / last subscriber - upstream write (ms). */
  firstSubscriberLatencyMs: Summary;
  lastSubscriberLatencyMs: Summary;
  /** POST /conversations/{id}/messages round trip (ms): the whole reply, stored. */
  httpMessageMs: Summary;
  cpu: CpuWindow;
  problems: string[];
}

interface Arrival {
  at: number;
  data: Buffer;
}

/** CLOCK_MONOTONIC µs as a float, cheap enough for the message handler. */
function nowMicros(): number {
  return Number(process.hrtime.bigint()) / 1000;
}

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

export async function runFanout(troupe: Troupe, characterId: string, options: FanoutOptions, log: (line: string) => void): Promise<FanoutResult> {
  const conversation = options.conversationId ? { id: options.conversationId } : await api<{ id: string }>(troupe, 'POST', '/conversations', { characterId }, 201);
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
      await api(troupe, 'POST', `/conversations/${conversation.id}/messages`, { content: `${STAMP_PREFIX} message ${m}` }, 200);
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
  const result: FanoutResult = {
    subscribers: options.subscribers,
    messages: options.messages,
    chunksPerMessage: options.chunks,
    gapMs: options.gapMs,
    completeChunks,
    expectedDeliveries: expected,
    missingDeliveries: missing,
    spreadMs: summarize(spread),
    latencyMs: summarize(latency),
    firstSubscriberLatencyMs: summarize(firstLatency),
    lastSubscriberLatencyMs: summarize(lastLatency),
    httpMessageMs: summarize(httpMs),
    cpu,
    problems,
  };
  log(
    `fan-out: ${completeChunks} chunks x ${options.subscribers} subscribers, spread p50/p99 ${result.spreadMs.p50.toFixed(3)}/${result.spreadMs.p99.toFixed(3)} ms, ` +
      `latency p50/p99 ${result.latencyMs.p50.toFixed(3)}/${result.latencyMs.p99.toFixed(3)} ms, missing ${missing}`,
  );
  return result;
}
