/**
 * Part (a): idle conversation WebSockets on one Troupe. Their client side lives in socket-holder
 * processes (one may lack the file descriptors; their memory is counted apart).
 */
import { createInterface } from 'node:readline';
import { childEnv, delay, ROOT, spawnTracked, withFileLimit, type Log } from '../support/children.ts';
import { processMemory } from '../support/proc.ts';
import { createConversation, postMessage, type Troupe } from '../support/troupe.ts';

export type MemorySample = Awaited<ReturnType<typeof probeTroupe>>['memory'];
const MIB = 2 ** 20;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

/** A full GC in Troupe, then its memory (VmRSS, VmHWM from /proc right after it); with the GC pauses [start µs, ms, kind] so far. */
export async function probeTroupe(troupe: Troupe) {
  const r = await troupe.probe();
  const mem = processMemory(troupe.child.pid);
  if (!mem) throw new Error(`cannot read /proc/${troupe.child.pid}/status`);
  const n = (key: string) => Number(r[key]);
  const memory = {
    rss: mem.rss, peakRss: mem.peakRss, heapUsed: n('heapUsed'), heapTotal: n('heapTotal'), external: n('external'),
    arrayBuffers: n('arrayBuffers'), mallocedMemory: n('mallocedMemory'), gc: r.gc === true,
  };
  return { memory, gcEvents: (r.gcEvents as [number, number, number][] | undefined) ?? [] };
}

/**
 * Samples 2 s apart until RSS and the V8 heap's committed size hold steady (twice in a row within
 * 2 MiB), at most 15 times: V8 and malloc give memory back gradually after a burst of allocation,
 * and a sample taken meanwhile would count the release as a change caused by the sockets.
 */
async function sampleMemorySettled(troupe: Troupe): Promise<MemorySample & { rssSamples: number[]; settled: boolean }> {
  const rssSamples: number[] = [];
  let previous: MemorySample | null = null;
  let calm = 0;
  for (let i = 0; i < 15; i++) {
    if (i > 0) await delay(2_000);
    const sample = (await probeTroupe(troupe)).memory;
    rssSamples.push(sample.rss);
    const steady = previous && Math.abs(sample.rss - previous.rss) <= 2 * MIB && Math.abs(sample.heapTotal - previous.heapTotal) <= 2 * MIB;
    calm = steady ? calm + 1 : 0;
    previous = sample;
    if (calm >= 2) return { ...sample, rssSamples, settled: true };
  }
  return { ...previous!, rssSamples, settled: false };
}

type HolderStats = { open: number; unexpectedCloses: number; messages: number; doneChunks: number; rss: number; heapUsed: number };
type ConnectResult = { ok: number; errors: Record<string, number>; samples: Record<string, string>; ms: number };
type Holder = Awaited<ReturnType<typeof startHolder>>;

/** A socket-holder.ts process, with `ulimit -n` raised, talking one JSON line per command and answer (one at a time). */
async function startHolder(name: string, fdLimit: number, localAddress: string) {
  const command = withFileLimit(fdLimit, process.execPath, ['--expose-gc', 'loadtest/conversation-support/socket-holder.ts']);
  const holder = spawnTracked({ name, ...command, cwd: ROOT, env: childEnv({}), stdin: 'pipe' });
  const waiters: { op: string; resolve: (value: unknown) => void; reject: (err: Error) => void }[] = [];
  const gone = () => new Error(`${name} exited: ${holder.tail().slice(-500)}`);
  void holder.exited.then(() => waiters.splice(0).forEach((w) => w.reject(gone())));
  createInterface({ input: holder.child.stdout }).on('line', (line) => {
    const answer = JSON.parse(line) as { op?: string; message?: string };
    // Anything else answers a command whose wait timed out: dropped.
    if (answer.op !== waiters[0]?.op && answer.op !== 'error') return;
    const waiter = waiters.shift();
    if (answer.op === 'error') waiter?.reject(new Error(`${name}: ${answer.message}`));
    else waiter?.resolve(answer);
  });
  holder.child.stdin.on('error', () => {}); // the exit handler reports it
  const next = <T>(op: string, timeoutMs: number) =>
    new Promise<T>((resolve, reject) => {
      if (holder.exitInfo()) return reject(gone());
      const timer = setTimeout(() => (waiters.splice(waiters.indexOf(waiter), 1),
        reject(new Error(`${name}: no answer to ${op} within ${timeoutMs} ms`))), timeoutMs);
      const waiter = { op, resolve: (v: unknown) => (clearTimeout(timer), resolve(v as T)),
        reject: (e: Error) => (clearTimeout(timer), reject(e)) };
      waiters.push(waiter);
    });
  const hello = await next<{ fdLimit: number | null }>('hello', 30_000);
  return {
    fdLimit: hello.fdLimit,
    localAddress,
    command<T>(cmd: Record<string, unknown>, timeoutMs: number): Promise<T> {
      const answer = next<T>(String(cmd.op), timeoutMs);
      holder.child.stdin.write(`${JSON.stringify(cmd)}\n`);
      return answer;
    },
    async stop() {
      // Closing stdin asks it to exit (SIGCONT does nothing); SIGKILL after 10 s.
      holder.child.stdin.end();
      await holder.stop(10_000, 'SIGCONT');
    },
  };
}

export interface IdlePlan {
  requested: number;
  /** Sockets this run will open (requested, capped by ports / file descriptors), and why when capped. */
  target: number;
  capReason: string | null;
  conversations: number;
  /** One entry per holder process: source address and socket count. */
  holders: { localAddress: string; count: number }[];
}

export type IdleOptions = { concurrency: number; connectTimeoutMs: number; settleMs: number; warmupSockets: number };
export type IdleResult = Awaited<ReturnType<typeof runIdle>>;

export async function runIdle(troupe: Troupe, characterId: string, plan: IdlePlan, options: IdleOptions, log: Log) {
  const conversations: string[] = [];
  while (conversations.length < plan.conversations) {
    const batch = Math.min(8, plan.conversations - conversations.length);
    conversations.push(...(await Promise.all(Array.from({ length: batch }, () => createConversation(troupe, characterId)))));
  }

  log(`idle sockets: ${plan.conversations} conversations created; starting ${plan.holders.length} client process(es)`);
  const holders: Holder[] = [];
  try {
    for (const [i, h] of plan.holders.entries()) holders.push(await startHolder(`socket-holder-${i}`, h.count + 1024, h.localAddress));
    const stats = () => Promise.all(holders.map((h) => h.command<HolderStats>({ op: 'stats' }, 60_000)));
    const connect = (holder: Holder, count: number, offset: number) => {
      const { concurrency, connectTimeoutMs: timeoutMs } = options;
      const cmd = { op: 'connect', base: troupe.base, token: troupe.key, conversations, count, offset, concurrency, timeoutMs };
      const localAddress = holder.localAddress === '127.0.0.1' ? {} : { localAddress: holder.localAddress };
      return holder.command<ConnectResult>({ ...cmd, ...localAddress }, Math.max(120_000, count * 20) + timeoutMs);
    };
    // Warm-up: Troupe's upgrade path compiled and its one-time structures allocated before "before".
    const first = holders[0];
    if (first && options.warmupSockets > 0) {
      const warm = await connect(first, Math.min(options.warmupSockets, plan.target), 0);
      await first.command({ op: 'close' }, 60_000);
      log(`idle sockets: warm-up ${warm.ok} sockets opened and closed`);
      await delay(1_000);
    }
    const clientBeforeStats = await stats();
    const troupeBefore = await sampleMemorySettled(troupe);
    log(`idle sockets: Troupe before: RSS ${mib(troupeBefore.rss)} MiB, heap used ${mib(troupeBefore.heapUsed)} MiB`);
    // Two steps (each holder its first half, then its second half) with a sample in between: the
    // slope over the second half leaves out one-time growth the first sockets trigger.
    const t0 = Date.now();
    const progress = setInterval(() => log(`idle sockets: connecting (${Math.round((Date.now() - t0) / 1000)} s)`), 15_000);
    const connected: ConnectResult[] = [];
    let connectMs = 0;
    let half: { sample: MemorySample; open: number } | null = null;
    try {
      for (const step of [0, 1] as const) {
        let offset = 0;
        const results = await Promise.all(plan.holders.map((h, i) => {
          const firstHalf = Math.floor(h.count / 2);
          const job = step === 0 ? connect(holders[i]!, firstHalf, offset) : connect(holders[i]!, h.count - firstHalf, offset + firstHalf);
          offset += h.count;
          return job;
        }));
        connected.push(...results);
        // Holders connect in parallel: a step lasts as long as its slowest holder.
        connectMs += Math.max(0, ...results.map((r) => r.ms));
        if (step === 1) break;
        await delay(options.settleMs);
        const open = sum((await stats()).map((s) => s.open));
        half = { sample: await sampleMemorySettled(troupe), open };
        log(`idle sockets: Troupe with ${open} sockets: RSS ${mib(half.sample.rss)} MiB, heap used ${mib(half.sample.heapUsed)} MiB`);
      }
    } finally {
      clearInterval(progress);
    }
    const opened = sum(connected.map((c) => c.ok));
    const errors: Record<string, number> = {};
    const errorSamples: Record<string, string> = {};
    for (const c of connected) {
      for (const [k, v] of Object.entries(c.errors)) errors[k] = (errors[k] ?? 0) + v;
      for (const [k, v] of Object.entries(c.samples)) errorSamples[k] ??= v;
    }
    const failures = opened < plan.target ? ` (failures: ${JSON.stringify(errors)})` : '';
    log(`idle sockets: ${opened} of ${plan.target} open after ${(connectMs / 1000).toFixed(1)} s${failures}`);
    await delay(options.settleMs);
    const troupeAfter = await sampleMemorySettled(troupe);
    const clientAfterStats = await stats();
    const openAtSample = sum(clientAfterStats.map((s) => s.open));
    const unexpectedCloses = sum(clientAfterStats.map((s) => s.unexpectedCloses));
    const after = `RSS ${mib(troupeAfter.rss)} MiB, heap used ${mib(troupeAfter.heapUsed)} MiB`;
    log(`idle sockets: Troupe after: ${after} with ${openAtSample} sockets open`);
    // Liveness: every socket of the first conversation (socket i joins conversation i mod n) gets a reply's done chunk.
    let liveness: { conversation: string; expected: number; received: number; ms: number } | null = null;
    const total = sum(plan.holders.map((h) => h.count));
    const onFirst = total > 0 ? Math.floor((total - 1) / conversations.length) + 1 : 0;
    const conversation = conversations[0];
    if (conversation && onFirst > 0 && unexpectedCloses === 0) {
      await Promise.all(holders.map((h) => h.command({ op: 'reset' }, 30_000)));
      const l0 = Date.now();
      await postMessage(troupe, conversation, 'Are you still there?');
      let received = 0;
      for (const deadline = Date.now() + 15_000; Date.now() < deadline && received < onFirst; await delay(200)) {
        received = sum((await stats()).map((s) => s.doneChunks));
      }
      liveness = { conversation, expected: onFirst, received, ms: Date.now() - l0 };
      log(`idle sockets: liveness check: ${received} of ${onFirst} sockets of one conversation got the reply`);
    }
    const per = (a: number, b: number) => (b - a) / openAtSample;
    const added = half ? openAtSample - half.open : 0;
    const client = (s: HolderStats[]) => ({ rss: sum(s.map((x) => x.rss)), heapUsed: sum(s.map((x) => x.heapUsed)) });
    const [clientBefore, clientAfter] = [client(clientBeforeStats), client(clientAfterStats)];
    const [b, a] = [troupeBefore, troupeAfter];
    return {
      plan, opened, failed: plan.target - opened, errors, errorSamples, connectSec: connectMs / 1000, openAtSample, unexpectedCloses,
      troupeBefore, troupeAfter,
      perSocket: openAtSample > 0
        ? {
          rssBytes: per(b.rss, a.rss), heapUsedBytes: per(b.heapUsed, a.heapUsed), externalBytes: per(b.external, a.external),
          mallocedBytes: per(b.mallocedMemory, a.mallocedMemory),
        }
        : null,
      troupeHalf: half?.sample ?? null,
      /** Slope between the half and the full sample: memory per socket without one-time growth. */
      marginalPerSocket: half && added > 0
        ? {
          fromSockets: half.open, toSockets: openAtSample, rssBytes: (a.rss - half.sample.rss) / added,
          heapUsedBytes: (a.heapUsed - half.sample.heapUsed) / added,
        }
        : null,
      clientBefore, clientAfter, clientPerSocketRssBytes: openAtSample > 0 ? (clientAfter.rss - clientBefore.rss) / openAtSample : null,
      clientProcesses: holders.length, clientFdLimits: holders.map((h) => h.fdLimit), liveness,
    };
  } finally {
    // Troupe is stopped by the caller first (its sockets close from its side, so the clients' ports
    // are not left in TIME_WAIT); then stopIdleClients() stops the holders.
    holdersToStop.push(...holders);
  }
}

const holdersToStop: Holder[] = [];
export const stopIdleClients = (): Promise<unknown> => Promise.all(holdersToStop.splice(0).map((h) => h.stop()));
