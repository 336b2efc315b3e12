/** The four outages of bench:outages, each on a fresh cluster (cluster.ts) under the load of load.ts. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Log } from '../support/children.ts';
import { summarize, tally as countBy } from '../support/report.ts';
import { createCharacter, createConversation, roomPlacement } from '../support/troupe.ts';
import { checkHistories, checkSockets, incidents, type StoredMessage } from './check.ts';
import { Cluster, gone, SLOTS, other, type ClusterOptions, type Slot } from './cluster.ts';
import { Load, type Outcome, type Send } from './load.ts';
import type { Settings } from '../outages.ts';

/**
 * Starts a cluster and the load, runs `fault`, then stops the load and checks everything it saw.
 * `fault` resolves with what to measure, read once the load has stopped (every answer is in).
 */
type Fault<T> = (cluster: Cluster, load: Load, convs: number[]) => Promise<() => T>;

async function scenario<T extends object>(name: string, s: Settings, log: Log, options: Partial<ClusterOptions>, fault: Fault<T>) {
  const { databaseUrl, engine, replyChunks, chunkDelayMs } = s;
  const defaults = { databaseUrl, engine, proxyDatabase: false, failoverMs: 5_000, replyChunks, chunkDelayMs };
  const cluster = await Cluster.start({ ...defaults, ...options });
  let load: Load | null = null;
  try {
    const api = { base: cluster.nodes.A!.troupe.base, auth: `Bearer ${cluster.key}` };
    const characterId = await createCharacter(api, 'Warden', '');
    const conversations: string[] = [];
    for (let i = 0; i < s.conversations; i++) conversations.push(await createConversation(api, characterId));
    const { thinkMs, requestTimeoutMs, readRate } = s;
    load = new Load(cluster, { conversations, characterId, thinkMs, requestTimeoutMs, readRate });
    log(`${name}: ${cluster.engine} engine, ${conversations.length} conversations; load on, warming up ${s.warmupMs} ms`);
    load.start();
    await sleep(s.warmupMs);
    const tFault = load.now();
    const measure = await fault(cluster, load, conversations.map((_, i) => i));
    await sleep(s.afterMs);
    log(`${name}: stopping the load`);
    await load.stop(s.socketGraceMs);
    const measured = measure();
    const histories = await Promise.all(conversations.map((id) => readHistory(cluster, id)));
    const history = checkHistories(load.sends, histories);
    const odd = incidents(load.sends, histories, tFault);
    const logFiles: string[] = [];
    const broken = history.lost + history.duplicated + history.reordered + history.notAlternating + history.wrongReply > 0;
    const crashed = cluster.all.some((node) => (node.troupe.child.exitInfo()?.code ?? null) !== null);
    if (broken || odd.some((i) => i.answer === 'timeout') || crashed) {
      await mkdir(s.logDir, { recursive: true });
      for (const node of cluster.all) {
        const file = join(s.logDir, `${name.replace(/\W+/g, '-')}-${node.label}.log`);
        await writeFile(file, node.troupe.child.output());
        logFiles.push(file);
      }
    }
    const result = {
      scenario: name, engine: cluster.engine, ...measured, history, incidents: odd, logFiles,
      /** Load-clock ms of the fault (incident times are relative to it). */
      tFault: Math.round(tFault), sockets: checkSockets(load.sends, histories, load.sessions, s.socketGraceMs), messages: tally(load.sends),
      replyBeforeFaultMs: spread(load.sends.filter((x) => x.status === 200 && x.t1 <= tFault).map((x) => x.t1 - x.t0)),
      refusedMs: spread(load.sends.filter((x) => x.status !== 200).map((x) => x.t1 - x.t0)),
      /** Refused before the fault, not its doing (so far: first messages of a new conversation through both processes at once). */
      refusedBeforeFault: tally(load.sends.filter((x) => x.status !== 200 && x.t1 < tFault)),
      refusedFromFault: tally(load.sends.filter((x) => x.status !== 200 && x.t1 >= tFault)),
      reads: tally(load.reads), logs: logSummary(cluster),
      takeovers: logLines(cluster, 'the process running an actor stopped its heartbeat; taking its actors over'),
      superseded: logLines(cluster, 'conversation actor superseded by another process; disposing it'),
    };
    log(`${name}: ${JSON.stringify({ ...measured, history: result.history, sockets: { ...result.sockets, examples: undefined } })}`);
    return result;
  } finally {
    await cluster.close();
    await load?.stop(0); // after a failure: every request fails fast once the processes are gone
  }
}

/** A conversation's stored history, read through whichever process answers. */
async function readHistory(cluster: Cluster, id: string): Promise<StoredMessage[]> {
  for (let attempt = 0; attempt < 60; attempt++) {
    for (const slot of SLOTS) {
      const node = cluster.nodes[slot];
      if (!node || gone(node)) continue;
      const init = { headers: { authorization: `Bearer ${cluster.key}` }, signal: AbortSignal.timeout(30_000) };
      const res = await fetch(`${node.troupe.base}/conversations/${id}`, init).catch(() => null);
      if (res?.status === 200) return ((await res.json()) as { messages: StoredMessage[] }).messages;
    }
    await sleep(500);
  }
  throw new Error(`could not read conversation ${id}`);
}

const startedAfter = (t: number) => (x: { t0: number }) => x.t0 >= t;

export function redisRestart(s: Settings, log: Log) {
  return scenario('redis restart', s, log, {}, async (cluster, load, convs) => {
    const tFault = load.now();
    const { downMs } = await cluster.redis.restart();
    log(`redis restart: Redis down ${Math.round(downMs)} ms; waiting for every conversation to answer through both processes`);
    const both = () => SLOTS.every((via) => recovery(load, convs, tFault, (x) => x.via === via && x.t0 >= tFault).missing.length === 0);
    await waitUntil(both, s.recoveryCapMs);
    const unrecovered = SLOTS.map((via) => recovery(load, convs, tFault, (x) => x.via === via && x.t0 >= tFault).missing.length);
    return () => {
      const any = recovery(load, convs, tFault, startedAfter(tFault));
      const perSlot = SLOTS.map((via) => recovery(load, convs, tFault, (x) => x.via === via && x.t0 >= tFault));
      const bothTimes = convs.map((_, i) => Math.max(...perSlot.map((r) => r.times[i] ?? Number.NaN)));
      return {
        redisDownMs: Math.round(downMs), answersAgainAnyMs: spread(any.times),
        answersAgainBothMs: spread(bothTimes.filter(Number.isFinite)),
        answersAgainViaMs: Object.fromEntries(SLOTS.map((via, i) => [via, spread(perSlot[i]?.times ?? [])])),
        unrecovered: unrecovered.reduce((a, b) => a + b, 0),
        messagesAfterFault: tally(load.sends.filter((x) => x.t0 >= tFault && x.t0 < tFault + 5_000)),
        readiness: Object.fromEntries(SLOTS.map((via) => [via, readiness(load, via, tFault)])),
      };
    };
  });
}

export function processKill(s: Settings, log: Log, failoverMs: number) {
  return scenario(`SIGKILL, ACTOR_FAILOVER_MS=${failoverMs}`, s, log, { failoverMs }, async (cluster, load, convs) => {
    const victim = cluster.nodes.A!;
    const placement = await roomPlacement(cluster.redis.url);
    const owned = convs.filter((conv) => placement.get(load.conversationId(conv)) === victim.processId);
    const inFlight = load.inFlight(victim.label);
    const tKill = load.now();
    await victim.troupe.child.stop(0, 'SIGKILL');
    log(`SIGKILL: killed ${victim.label} (${owned.length} of ${convs.length} actors on it, ${inFlight.length} messages in flight to it)`);
    const viaB = (x: { via: Slot; t1: number }) => x.via === 'B' && x.t1 > tKill;
    await waitUntil(() => recovery(load, owned, tKill, viaB).missing.length === 0, s.recoveryCapMs);
    const notTakenOver = recovery(load, owned, tKill, viaB).missing.length;
    return () => {
      const failover = recovery(load, owned, tKill, viaB);
      const others = convs.filter((c) => !owned.includes(c));
      const meanwhile = (x: Send) => others.includes(x.conv) && x.via === 'B' && x.t1 > tKill && x.t0 < tKill + failoverMs;
      const otherLatency = load.sends.filter(meanwhile).map((x) => x.t1 - x.t0);
      const inFlightToKilled = { n: inFlight.length, outcomes: tally(inFlight) };
      const [failoverTimeMs, otherConversationsReplyMs] = [spread(failover.times), spread(otherLatency)];
      return { failoverMs, actorsOnKilled: owned.length, inFlightToKilled, failoverTimeMs, notTakenOver, otherConversationsReplyMs };
    };
  });
}

export function postgresOutage(s: Settings, log: Log, mode: 'reset' | 'blackhole') {
  return scenario(`PostgreSQL ${mode}`, s, log, { proxyDatabase: true }, async (cluster, load, convs) => {
    const proxy = cluster.pgProxy!;
    const tCut = load.now();
    await proxy.cut(mode);
    await sleep(s.pgOutageMs);
    const tRestore = load.now();
    await proxy.restore();
    log(`PostgreSQL ${mode}: cut for ${Math.round(tRestore - tCut)} ms; waiting for every conversation to answer again`);
    const after = (x: { t0: number }) => x.t0 >= tRestore;
    const missing = (via: Slot) => recovery(load, convs, tRestore, (x) => x.via === via && after(x)).missing.length;
    await waitUntil(() => SLOTS.every((via) => missing(via) === 0), s.recoveryCapMs);
    const unrecovered = SLOTS.map(missing).reduce((a, b) => a + b, 0);
    return () => measurePostgres(load, convs, tCut, tRestore, unrecovered);
  });
}

function measurePostgres(load: Load, convs: number[], tCut: number, tRestore: number, unrecovered: number) {
  const after = (x: { t0: number }) => x.t0 >= tRestore;
  const during = (x: { t0: number }) => x.t0 >= tCut && x.t0 < tRestore;
  const outages = [...load.sends.filter(during), ...load.reads.filter(during)];
  const strays = load.sends.filter((x) => x.t0 < tCut && x.t1 > tCut);
  // A 200 to a request started during the outage: served without the database, or held until it came back.
  const ok = [...load.sends, ...load.reads.filter((x) => x.kind === 'conversation')].filter((x) => during(x) && x.status === 200);
  const perSlot = SLOTS.map((via) => recovery(load, convs, tRestore, (x) => x.via === via && after(x)));
  const readsBack = SLOTS.map((via) => {
    const ok = load.reads.filter((r) => r.via === via && r.kind === 'conversation' && r.status === 200 && r.t0 >= tRestore);
    return ok.length ? Math.round(Math.min(...ok.map((r) => r.t1)) - tRestore) : null;
  });
  return {
    outageMs: Math.round(tRestore - tCut),
    during: {
      messages: tally(load.sends.filter(during)),
      conversationReads: tally(load.reads.filter((x) => during(x) && x.kind === 'conversation')),
      characterReads: tally(load.reads.filter((x) => during(x) && x.kind === 'character')),
    },
    okDuring: { beforeRestore: ok.filter((x) => x.t1 < tRestore).length, heldUntilAfter: ok.filter((x) => x.t1 >= tRestore).length },
    heldMs: spread(ok.map((x) => x.t1 - x.t0)),
    /** Every answer to a request that needs the database (messages, history reads) started during the outage. */
    anyAnswerMs: spread([...load.sends, ...load.reads.filter((x) => x.kind === 'conversation')].filter(during).map((x) => x.t1 - x.t0)),
    latency503Ms: spread(outages.filter((x) => x.status === 503).map((x) => x.t1 - x.t0)),
    readLatency503Ms: spread(load.reads.filter((x) => during(x) && x.status === 503).map((x) => x.t1 - x.t0)),
    messageLatency503Ms: spread(load.sends.filter(during).filter((x) => x.status === 503).map((x) => x.t1 - x.t0)),
    inFlightAtCut: {
      n: strays.length, outcomes: tally(strays), slowestMs: strays.length ? Math.round(Math.max(...strays.map((x) => x.t1 - tCut))) : null,
    },
    messagesBackMs: spread(convs.map((_, i) => Math.max(...perSlot.map((r) => r.times[i] ?? Number.NaN))).filter(Number.isFinite)),
    unrecovered,
    readsBackMs: Object.fromEntries(SLOTS.map((via, i) => [via, readsBack[i]])),
    readiness: Object.fromEntries(SLOTS.map((via) => [via, readiness(load, via, tCut)])),
  };
}

export function rollingRestart(s: Settings, log: Log) {
  return scenario('rolling restart', s, log, {}, async (cluster, load) => {
    type Step = { node: string; tTerm: number; drainMs: number; exitCode: number | null; inFlight: number; startMs: number };
    const steps: (Step & { inFlightOutcomes: Record<string, number> })[] = [];
    for (const slot of SLOTS) {
      const node = cluster.nodes[slot]!;
      cluster.route[slot] = other(slot); // out of rotation first, as a balancer does
      const inFlight = load.inFlight(node.label);
      const tTerm = load.now();
      const { code } = await node.troupe.child.stop(60_000);
      const drainMs = load.now() - tTerm;
      await waitUntil(() => inFlight.every((x) => x.t1 >= 0), 5_000);
      const started = load.now();
      const next = await cluster.startSlot(slot);
      const startMs = Math.round(load.now() - started);
      log(`rolling restart: ${node.label} drained in ${Math.round(drainMs)} ms (exit ${code}, ` +
        `${inFlight.length} messages in flight to it); ` +
        `${next.label} up in ${startMs} ms`);
      const step = { node: node.label, tTerm, drainMs: Math.round(drainMs), exitCode: code, inFlight: inFlight.length };
      steps.push({ ...step, inFlightOutcomes: tally(inFlight), startMs });
      await sleep(s.rollingSettleMs);
    }
    // Messages refused from SIGTERM until the next process was up, wherever they went.
    const refused = (step: Step) =>
      tally(load.sends.filter((x) => x.status !== 200 && x.t0 >= step.tTerm && x.t0 < step.tTerm + step.drainMs + step.startMs));
    return () => ({ steps: steps.map((step) => ({ ...step, tTerm: undefined, refusedMeanwhile: refused(step) })) });
  });
}

export type Spread = { n: number; p50: number | null; p99: number | null; max: number | null };

function spread(values: readonly number[]): Spread {
  const s = summarize(values);
  const r = (v: number) => (Number.isFinite(v) ? Math.round(v) : null);
  return { n: s.count, p50: r(s.p50), p99: r(s.p99), max: r(s.max) };
}

/**
 * Per conversation (indices in `convs`), ms from `since` to the first 200 among the sends that
 * match `which`; conversations with none yet are `missing`.
 */
function recovery(load: Load, convs: readonly number[], since: number, which: (s: Send) => boolean) {
  const times: number[] = [];
  const missing: number[] = [];
  for (const conv of convs) {
    // A 200 carrying the reply to another message is not an answer.
    const ok = load.sends.filter((s) => s.conv === conv && s.status === 200 && s.answeredTag === s.tag && which(s)).map((s) => s.t1);
    if (ok.length === 0) missing.push(conv);
    else times.push(Math.min(...ok) - since);
  }
  return { times, missing };
}

/** Resolves once `done()` holds or `capMs` passed; true if it held. */
async function waitUntil(done: () => boolean, capMs: number): Promise<boolean> {
  const end = performance.now() + capMs;
  while (!done()) {
    if (performance.now() > end) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

/** Outcomes by status or error code, e.g. `{ "200": 40, "503 database_unavailable": 12, "ECONNREFUSED": 3 }`. */
const tally = (outcomes: readonly Outcome[]): Record<string, number> =>
  countBy(outcomes, (o) => (o.status === null ? String(o.code) : o.status === 200 ? '200' : `${o.status} ${o.code ?? ''}`.trim()));

/** After `from`: when `/readyz` on the slot first failed, and when it answered 200 again (ms after `from`). */
function readiness(load: Load, via: Slot, from: number): { notReadyAfterMs: number | null; readyAgainAfterMs: number | null } {
  const polls = load.ready.filter((r) => r.via === via && r.t >= from);
  const down = polls.find((r) => !r.ok);
  const up = down ? polls.find((r) => r.t > down.t && r.ok) : undefined;
  return { notReadyAfterMs: down ? Math.round(down.t - from) : null, readyAgainAfterMs: up ? Math.round(up.t - from) : null };
}

/** Warnings and errors each process logged, by message, with one example line each. */
function logSummary(cluster: Cluster): Record<string, { counts: Record<string, number>; examples: string[]; exit: string }> {
  const out: Record<string, { counts: Record<string, number>; examples: string[]; exit: string }> = {};
  for (const node of cluster.all) {
    const counts: Record<string, number> = {};
    const examples: string[] = [];
    // From the `troupe listening` line on: start-up notes (no pgvector, no uWS) are not the outage's.
    const output = node.troupe.child.output();
    const from = output.indexOf('"msg":"troupe listening"');
    for (const line of output.slice(from < 0 ? 0 : from).split('\n').slice(1)) {
      if (!line.trim()) continue;
      let entry: { level?: number; msg?: string; err?: { message?: string } };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        counts['(not JSON)'] = (counts['(not JSON)'] ?? 0) + 1;
        if (examples.length < 6) examples.push(line.slice(0, 300));
        continue;
      }
      if ((entry.level ?? 0) < 40 && !/listed again|shutting down/.test(entry.msg ?? '')) continue;
      // Ids and ports vary line to line; the message is what to count by.
      const detail = (entry.err?.message ?? '').replace(/\b(conv|reply|req)_\w+/g, '$1_…').replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:…')
        .slice(0, 120);
      const key = `${entry.level ?? '?'} ${entry.msg ?? '?'}${detail ? `: ${detail}` : ''}`;
      if (counts[key] === undefined && examples.length < 6) examples.push(line.slice(0, 400));
      counts[key] = (counts[key] ?? 0) + 1;
    }
    const exit = node.troupe.child.exitInfo();
    out[node.label] = { counts, examples, exit: exit === null ? 'running' : `${exit.code ?? exit.signal}` };
  }
  return out;
}

/** How many lines, over every process, logged `msg`. */
function logLines(cluster: Cluster, msg: string): number {
  const needle = `"msg":${JSON.stringify(msg)}`;
  return cluster.all.reduce((n, node) => n + node.troupe.child.output().split(needle).length - 1, 0);
}
