/** bench:conversations (a): idle conversation WebSockets on one Troupe, held by socket-holder.ts processes, and Troupe's
 * memory per socket; `probeTroupe` reads that memory (after a full GC) for the perform part too. */
import { childEnv, delay, parseJson, ROOT, spawnTracked, withFileLimit } from '../support/children.ts';
import * as proc from '../support/proc.ts';
import * as api from '../support/troupe.ts';

type Settings = { sockets: number; conversations: number; sourceAddresses: string[]; socketsPerClient: number; connectConcurrency: number };
/** Ephemeral ports left for everything else; file descriptors left free in Troupe. */
const [PORT_RESERVE, FD_MARGIN, CONNECT_TIMEOUT_MS, SETTLE_MS, WARMUP_SOCKETS] = [2_000, 64, 30_000, 3_000, 500];
export const MIB = 2 ** 20;
export const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);
/** A full GC in Troupe, then its memory (VmRSS, VmHWM from /proc right after it), with its GC pauses [start µs, ms, kind] so far. */
export async function probeTroupe(troupe: api.Troupe) {
  const [r, mem] = [await troupe.probe(), proc.processMemory(troupe.child.pid)];
  if (!mem) throw new Error(`cannot read /proc/${troupe.child.pid}/status`);
  const n = (key: string) => Number(r[key]);
  return {
    memory: { rss: mem.rss, peakRss: mem.peakRss, heapUsed: n('heapUsed'), heapTotal: n('heapTotal'), external: n('external'),
      arrayBuffers: n('arrayBuffers'), mallocedMemory: n('mallocedMemory'), gc: r.gc === true },
    gcEvents: (r.gcEvents as [number, number, number][] | undefined) ?? [],
  };
}
export type MemorySample = Awaited<ReturnType<typeof probeTroupe>>['memory'];
/** How many idle sockets fit (ports per source address, Troupe's file descriptors), spread over socket-holder processes. */
function planSockets(troupe: api.Troupe, cfg: Settings) {
  const ports = proc.ephemeralPortCount() ?? 28_232;
  const perSource = Math.max(0, ports - PORT_RESERVE);
  // Raising the hard limit needs CAP_SYS_RESOURCE (root alone is not enough, e.g. in containers).
  const fdMax = proc.canRaiseHardLimits() ? (proc.maxFileLimit() ?? 1_048_576) : (proc.fileLimits('self')?.hard ?? 1024);
  // What Troupe actually got decides: the wrapper falls back to the hard limit when raising fails.
  const [fdLimit, inUse] = [proc.fileLimits(troupe.child.pid)?.soft ?? fdMax, proc.openFileCount(troupe.child.pid) ?? 0];
  const caps: [limit: number, reason: string][] = [
    [perSource * cfg.sourceAddresses.length, `ports: ${ports} ephemeral ports less ${PORT_RESERVE} per source address`],
    [Math.max(0, fdLimit - inUse - FD_MARGIN), `file descriptors: Troupe got ulimit -n ${fdLimit}, uses ${inUse}, less ${FD_MARGIN}`],
  ];
  const target = Math.min(cfg.sockets, ...caps.map(([limit]) => limit));
  const perClient = Math.max(100, Math.min(cfg.socketsPerClient, fdMax - 1024));
  // Each source address takes up to perSource sockets, in holders of up to perClient.
  const holders = cfg.sourceAddresses.flatMap((localAddress, a) => {
    const share = Math.max(0, Math.min(perSource, target - a * perSource));
    const count = (i: number) => Math.min(perClient, share - i * perClient);
    return Array.from({ length: Math.ceil(share / perClient) }, (_, i) => ({ localAddress, count: count(i) }));
  });
  const binding = caps.filter(([limit]) => limit < cfg.sockets).sort((x, y) => x[0] - y[0]);
  const capReason = binding.map(([limit, reason], i) => `${i === 0 ? 'limit' : 'also'}: ${reason} (${limit})`).join('; ') || null;
  return { requested: cfg.sockets, target, capReason, conversations: Math.min(cfg.conversations, target), holders };
}
/** Samples 2 s apart until RSS and V8's committed heap hold steady (twice within 2 MiB), at most 15 times: V8 and malloc
 * give memory back gradually after a burst, and a sample taken meanwhile would count that as a change. */
async function settledMemory(troupe: api.Troupe) {
  const rssSamples: number[] = [];
  let [previous, calm]: [MemorySample | null, number] = [null, 0];
  for (let i = 0; i < 15 && calm < 2; i++) {
    if (i > 0) await delay(2_000);
    const sample = (await probeTroupe(troupe)).memory;
    rssSamples.push(sample.rss);
    const steady = previous && Math.abs(sample.rss - previous.rss) <= 2 * MIB && Math.abs(sample.heapTotal - previous.heapTotal) <= 2 * MIB;
    calm = steady ? calm + 1 : 0;
    previous = sample;
  }
  return { ...previous!, rssSamples, settled: calm >= 2 };
}
type HolderStats = { open: number; unexpectedCloses: number; doneChunks: number; rss: number; heapUsed: number; fdLimit: number | null };
export type Holder = ReturnType<typeof startHolder>;
/** A socket-holder.ts process (`ulimit -n` raised): one JSON command per stdin line, one answer per stdout line, in turn. */
function startHolder(name: string, fdLimit: number) {
  let settle = (_answer: Record<string, unknown> | Error): void => {};
  const onLine = (line: string) => {
    const answer = parseJson(line);
    if (answer) settle(answer.op === 'error' ? new Error(`${name}: ${String(answer.message)}`) : answer);
  };
  const command = withFileLimit(fdLimit, process.execPath, ['--expose-gc', 'loadtest/conversation-support/socket-holder.ts']);
  const holder = spawnTracked({ name, ...command, cwd: ROOT, env: childEnv({}), stdin: 'pipe', onLine });
  const gone = () => new Error(`${name} exited: ${holder.tail().slice(-500)}`);
  void holder.exited.then(() => settle(gone()));
  holder.child.stdin.on('error', () => {}); // the exit handler reports it
  return {
    // After a timeout the part fails, so a late answer is never taken for another command's.
    ask: <T>(cmd: Record<string, unknown>, timeoutMs: number) => new Promise<T>((resolve, reject) => {
      if (holder.exitInfo()) return reject(gone());
      const timer = setTimeout(() => settle(new Error(`${name}: no answer to ${String(cmd.op)} within ${timeoutMs} ms`)), timeoutMs);
      settle = (answer) => {
        clearTimeout(timer);
        settle = () => {};
        return answer instanceof Error ? reject(answer) : resolve(answer as T);
      };
      holder.child.stdin.write(`${JSON.stringify(cmd)}\n`);
    }),
    // Closing stdin asks it to exit (SIGCONT does nothing); SIGKILL after 10 s.
    stop: () => (holder.child.stdin.end(), holder.stop(10_000, 'SIGCONT')),
  };
}
/** The caller stops `holders` after Troupe: it closes the sockets from its side, so the clients' ports are not left in TIME_WAIT. */
export async function runIdle(troupe: api.Troupe, holders: Holder[], cfg: Settings) {
  const plan = planSockets(troupe, cfg);
  const characterId = await api.createCharacter(troupe, 'Innkeeper');
  const [conversations, create] = [[] as string[], () => api.createConversation(troupe, characterId)];
  for (let left = plan.conversations; left > 0; left -= 8) {
    conversations.push(...(await Promise.all(Array.from({ length: Math.min(8, left) }, create))));
  }
  for (const [i, h] of plan.holders.entries()) holders.push(startHolder(`socket-holder-${i}`, h.count + 1024));
  const stats = () => Promise.all(holders.map((h) => h.ask<HolderStats>({ op: 'stats' }, 60_000)));
  type Connected = { ok: number; errors: Record<string, number>; ms: number };
  const connect = (i: number, count: number, offset: number) => holders[i]!.ask<Connected>({
    op: 'connect', base: troupe.base, token: troupe.key, conversations, count, offset, concurrency: cfg.connectConcurrency,
    localAddress: plan.holders[i]?.localAddress === '127.0.0.1' ? undefined : plan.holders[i]?.localAddress, timeoutMs: CONNECT_TIMEOUT_MS,
  }, Math.max(120_000, count * 20) + CONNECT_TIMEOUT_MS);
  // Warm-up: Troupe's upgrade path compiled and its one-time structures allocated before "before".
  if (holders[0]) {
    await connect(0, Math.min(WARMUP_SOCKETS, plan.target), 0);
    await holders[0].ask({ op: 'close' }, 60_000);
    await delay(1_000);
  }
  const client = (s: HolderStats[]) => ({ rss: sum(s.map((x) => x.rss)), heapUsed: sum(s.map((x) => x.heapUsed)) });
  const clientBefore = client(await stats());
  const before = await settledMemory(troupe);
  // Two steps (each holder its first half, then the rest) with a sample in between: the slope over
  // the second half leaves out one-time growth the first sockets trigger.
  const errors: Record<string, number> = {};
  let [opened, connectMs, next] = [0, 0, 0];
  let half: { sample: typeof before; open: number } | null = null;
  for (const step of [0, 1]) {
    const results = await Promise.all(plan.holders.map((h, i) => {
      const count = step === 0 ? Math.floor(h.count / 2) : Math.ceil(h.count / 2);
      return connect(i, count, (next += count) - count);
    }));
    opened += sum(results.map((r) => r.ok));
    for (const [k, v] of results.flatMap((r) => Object.entries(r.errors))) errors[k] = (errors[k] ?? 0) + v;
    // Holders connect in parallel: a step lasts as long as its slowest holder.
    connectMs += Math.max(0, ...results.map((r) => r.ms));
    await delay(SETTLE_MS);
    if (step === 0) half = { open: sum((await stats()).map((s) => s.open)), sample: await settledMemory(troupe) };
  }
  const after = await settledMemory(troupe);
  const afterStats = await stats();
  const [openAtSample, unexpectedCloses] = [sum(afterStats.map((s) => s.open)), sum(afterStats.map((s) => s.unexpectedCloses))];
  // Liveness: every socket of the first conversation (socket i joins conversation i mod n) gets a reply's done chunk.
  let liveness: { conversation: string; expected: number; received: number; ms: number } | null = null;
  const [conversation, expected] = [conversations[0], Math.ceil(plan.target / conversations.length)];
  if (conversation && expected > 0 && unexpectedCloses === 0) {
    const [l0, doneBefore] = [Date.now(), sum(afterStats.map((s) => s.doneChunks))];
    await api.postMessage(troupe, conversation, 'Are you still there?');
    let received = 0;
    for (const deadline = Date.now() + 15_000; Date.now() < deadline && received < expected; await delay(200)) {
      received = sum((await stats()).map((s) => s.doneChunks)) - doneBefore;
    }
    liveness = { conversation, expected, received, ms: Date.now() - l0 };
  }
  const per = (key: keyof MemorySample) => (Number(after[key]) - Number(before[key])) / openAtSample;
  const added = half ? openAtSample - half.open : 0;
  const clientAfter = client(afterStats);
  return {
    plan, opened, failed: plan.target - opened, errors, connectSec: connectMs / 1000, openAtSample, unexpectedCloses,
    troupeBefore: before, troupeAfter: after,
    perSocket: openAtSample > 0 ? { rssBytes: per('rss'), heapUsedBytes: per('heapUsed'), externalBytes: per('external'),
      mallocedBytes: per('mallocedMemory') } : null,
    troupeHalf: half?.sample ?? null,
    /** Slope between the half and the full sample: memory per socket without one-time growth. */
    marginalPerSocket: half && added > 0 ? { fromSockets: half.open, toSockets: openAtSample,
      rssBytes: (after.rss - half.sample.rss) / added, heapUsedBytes: (after.heapUsed - half.sample.heapUsed) / added } : null,
    clientBefore, clientAfter, clientPerSocketRssBytes: openAtSample > 0 ? (clientAfter.rss - clientBefore.rss) / openAtSample : null,
    clientProcesses: holders.length, clientFdLimits: afterStats.map((s) => s.fdLimit), liveness,
  };
}
