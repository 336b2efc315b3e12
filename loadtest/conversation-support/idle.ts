/**
 * Part (a): many idle conversation WebSockets on one Troupe process. The client side lives in
 * socket-holder processes; Troupe's memory is read (after a full GC through the heap probe)
 * before and after they connect, and per socket = (after - before) / sockets open.
 */
import { delay } from '../support/children.ts';
import { startHolder, type ConnectResult, type Holder, type HolderStats } from './holders.ts';
import { api, createConversations, sampleMemorySettled, type MemorySample, type Troupe } from './troupe.ts';

export interface IdlePlan {
  requested: number;
  /** Sockets this run will open (requested, capped by ports / file descriptors). */
  target: number;
  /** Why target < requested, when it is. */
  capReason: string | null;
  conversations: number;
  /** One entry per holder process: source address and socket count. */
  holders: { localAddress: string; count: number }[];
}

export interface IdleOptions {
  concurrency: number;
  connectTimeoutMs: number;
  settleMs: number;
  warmupSockets: number;
  root: string;
}

export interface IdleResult {
  plan: IdlePlan;
  opened: number;
  failed: number;
  errors: Record<string, number>;
  errorSamples: Record<string, string>;
  /** Time spent opening the sockets (both steps, without the sampling in between). */
  connectSec: number;
  /** Sockets still open when the "after" sample was taken. */
  openAtSample: number;
  unexpectedCloses: number;
  troupeBefore: MemorySample;
  troupeAfter: MemorySample;
  perSocket: { rssBytes: number; heapUsedBytes: number; externalBytes: number; mallocedBytes: number } | null;
  /** Troupe with the first half of the sockets open. */
  troupeHalf: MemorySample | null;
  /** Slope between the half and the full sample: memory per socket without one-time growth. */
  marginalPerSocket: { fromSockets: number; toSockets: number; rssBytes: number; heapUsedBytes: number } | null;
  clientBefore: { rss: number; heapUsed: number };
  clientAfter: { rss: number; heapUsed: number };
  clientPerSocketRssBytes: number | null;
  clientProcesses: number;
  clientFdLimits: (number | null)[];
  /** A reply posted into one conversation reached all of its idle sockets. */
  liveness: { conversation: string; expected: number; received: number; ms: number } | null;
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

async function holderStats(holders: readonly Holder[]): Promise<HolderStats[]> {
  return Promise.all(holders.map((h) => h.command<HolderStats>({ op: 'stats' }, 60_000)));
}

export async function runIdle(troupe: Troupe, characterId: string, plan: IdlePlan, options: IdleOptions, log: (line: string) => void): Promise<IdleResult> {
  const conversations = await createConversations(troupe, characterId, plan.conversations);
  log(`idle sockets: ${plan.conversations} conversations created; starting ${plan.holders.length} client process(es)`);
  const holders: Holder[] = [];
  try {
    for (const [i, h] of plan.holders.entries()) holders.push(await startHolder(`socket-holder-${i}`, h.count + 1024, h.localAddress, options.root));
    const base = troupe.base.replace(/^http/, 'ws');
    const connect = (holder: Holder, count: number, offset: number) =>
      holder.command<ConnectResult>(
        {
          op: 'connect',
          base,
          token: troupe.key,
          conversations,
          count,
          offset,
          concurrency: options.concurrency,
          timeoutMs: options.connectTimeoutMs,
          ...(holder.localAddress === '127.0.0.1' ? {} : { localAddress: holder.localAddress }),
        },
        Math.max(120_000, count * 20) + options.connectTimeoutMs,
      );

    // Warm-up: Troupe's upgrade path compiled and its one-time structures allocated before "before".
    const first = holders[0];
    if (first && options.warmupSockets > 0) {
      const warm = await connect(first, Math.min(options.warmupSockets, plan.target), 0);
      await first.command({ op: 'close' }, 60_000);
      log(`idle sockets: warm-up ${warm.ok} sockets opened and closed`);
      await delay(1_000);
    }

    const clientBeforeStats = await holderStats(holders);
    const troupeBefore = await sampleMemorySettled(troupe);
    log(`idle sockets: Troupe before: RSS ${(troupeBefore.rss / 2 ** 20).toFixed(1)} MiB, heap used ${(troupeBefore.heapUsed / 2 ** 20).toFixed(1)} MiB`);

    // Two steps (each holder its first half, then its second half) with a sample in between: the
    // slope over the second half leaves out one-time growth (V8 new space, allocator arenas)
    // that the first sockets trigger.
    const t0 = Date.now();
    const progress = setInterval(() => log(`idle sockets: connecting (${Math.round((Date.now() - t0) / 1000)} s)`), 15_000);
    const connected: ConnectResult[] = [];
    let connectMs = 0;
    let half: { sample: MemorySample; open: number } | null = null;
    try {
      for (const step of [0, 1] as const) {
        let offset = 0;
        const jobs = plan.holders.map((h, i) => {
          const holder = holders[i];
          if (!holder) throw new Error('holder missing');
          const firstHalf = Math.floor(h.count / 2);
          const job = step === 0 ? connect(holder, firstHalf, offset) : connect(holder, h.count - firstHalf, offset + firstHalf);
          offset += h.count;
          return job;
        });
        const results = await Promise.all(jobs);
        connected.push(...results);
        // Holders connect in parallel: a step lasts as long as its slowest holder.
        connectMs += Math.max(0, ...results.map((r) => r.ms));
        if (step === 0) {
          await delay(options.settleMs);
          const open = sum((await holderStats(holders)).map((s) => s.open));
          half = { sample: await sampleMemorySettled(troupe), open };
          log(`idle sockets: Troupe with ${open} sockets: RSS ${(half.sample.rss / 2 ** 20).toFixed(1)} MiB, heap used ${(half.sample.heapUsed / 2 ** 20).toFixed(1)} MiB`);
        }
      }
    } finally {
      clearInterval(progress);
    }
    const connectSec = connectMs / 1000;
    const opened = sum(connected.map((c) => c.ok));
    const errors: Record<string, number> = {};
    const errorSamples: Record<string, string> = {};
    for (const c of connected) {
      for (const [k, v] of Object.entries(c.errors)) errors[k] = (errors[k] ?? 0) + v;
      for (const [k, v] of Object.entries(c.samples)) errorSamples[k] ??= v;
    }
    log(`idle sockets: ${opened} of ${plan.target} open after ${connectSec.toFixed(1)} s${opened < plan.target ? ` (failures: ${JSON.stringify(errors)})` : ''}`);

    await delay(options.settleMs);
    const troupeAfter = await sampleMemorySettled(troupe);
    const clientAfterStats = await holderStats(holders);
    const openAtSample = sum(clientAfterStats.map((s) => s.open));
    const unexpectedCloses = sum(clientAfterStats.map((s) => s.unexpectedCloses));
    log(
      `idle sockets: Troupe after: RSS ${(troupeAfter.rss / 2 ** 20).toFixed(1)} MiB, heap used ${(troupeAfter.heapUsed / 2 ** 20).toFixed(1)} MiB ` +
        `with ${openAtSample} sockets open`,
    );

    // Liveness: the first conversation's sockets must all get a reply's done chunk.
    let liveness: IdleResult['liveness'] = null;
    const onFirst = countOnConversation(plan, conversations.length, 0);
    const conversation = conversations[0];
    if (conversation && onFirst > 0 && unexpectedCloses === 0) {
      await Promise.all(holders.map((h) => h.command({ op: 'reset' }, 30_000)));
      const l0 = Date.now();
      await api(troupe, 'POST', `/conversations/${conversation}/messages`, { content: 'Are you still there?' }, 200);
      let received = 0;
      for (const deadline = Date.now() + 15_000; Date.now() < deadline; await delay(200)) {
        received = sum((await holderStats(holders)).map((s) => s.doneChunks));
        if (received >= onFirst) break;
      }
      liveness = { conversation, expected: onFirst, received, ms: Date.now() - l0 };
      log(`idle sockets: liveness check: ${received} of ${onFirst} sockets of one conversation got the reply`);
    }

    const delta = (a: number, b: number) => (openAtSample > 0 ? (b - a) / openAtSample : Number.NaN);
    const added = half ? openAtSample - half.open : 0;
    const marginal =
      half && added > 0
        ? {
            fromSockets: half.open,
            toSockets: openAtSample,
            rssBytes: (troupeAfter.rss - half.sample.rss) / added,
            heapUsedBytes: (troupeAfter.heapUsed - half.sample.heapUsed) / added,
          }
        : null;
    const clientBefore = { rss: sum(clientBeforeStats.map((s) => s.rss)), heapUsed: sum(clientBeforeStats.map((s) => s.heapUsed)) };
    const clientAfter = { rss: sum(clientAfterStats.map((s) => s.rss)), heapUsed: sum(clientAfterStats.map((s) => s.heapUsed)) };
    return {
      plan,
      opened,
      failed: plan.target - opened,
      errors,
      errorSamples,
      connectSec,
      openAtSample,
      unexpectedCloses,
      troupeBefore,
      troupeAfter,
      perSocket:
        openAtSample > 0
          ? {
              rssBytes: delta(troupeBefore.rss, troupeAfter.rss),
              heapUsedBytes: delta(troupeBefore.heapUsed, troupeAfter.heapUsed),
              externalBytes: delta(troupeBefore.external, troupeAfter.external),
              mallocedBytes: delta(troupeBefore.mallocedMemory, troupeAfter.mallocedMemory),
            }
          : null,
      troupeHalf: half?.sample ?? null,
      marginalPerSocket: marginal,
      clientBefore,
      clientAfter,
      clientPerSocketRssBytes: openAtSample > 0 ? (clientAfter.rss - clientBefore.rss) / openAtSample : null,
      clientProcesses: holders.length,
      clientFdLimits: holders.map((h) => h.fdLimit),
      liveness,
    };
  } finally {
    // Troupe is stopped by the caller first (its sockets close from its side); then the holders go.
    holdersToStop.push(...holders);
  }
}

/** Holders of finished runs, stopped by stopIdleClients() once Troupe is gone. */
const holdersToStop: Holder[] = [];

export async function stopIdleClients(): Promise<void> {
  const list = holdersToStop.splice(0);
  await Promise.all(list.map((h) => h.stop()));
}

/** Sockets that joined conversation `c`: socket i (over all holders) joins conversation i mod n. */
function countOnConversation(plan: IdlePlan, n: number, c: number): number {
  const total = sum(plan.holders.map((h) => h.count));
  return total > c ? Math.floor((total - 1 - c) / n) + 1 : 0;
}
