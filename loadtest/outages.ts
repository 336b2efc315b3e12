/**
 * `npm run bench:outages` (issue 16): how long Troupe takes to answer again after a fault, and whether any message is lost,
 * duplicated or reordered. Each scenario starts a fresh rig under load (outage-support/rig.ts), injects its fault, keeps the
 * load up BENCH_AFTER_MS more and checks every history and socket stream (outage-support/check.ts). Settings: `settings`
 * below, plus BENCH_SCENARIOS, BENCH_FAILOVER_MS, BENCH_PG_MODES and BENCH_MAX_RUN_SEC [600]; BENCH_READ_RATE is per process,
 * BENCH_SOCKET_GRACE_MS how long after its 200 a socket must have the reply. Troupe logs are kept for a scenario with a timeout,
 * a lost, duplicated or reordered message, or a process that exited with a code. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gitState, logger, machine, runBench } from './support/children.ts';
import { envDatabaseUrl, envList, envNumber, envRates, envText, redactUrl } from './support/env.ts';
import { markdownTable, RESULTS_DIR, summarize, tally, writeResults } from './support/report.ts';
import { colyseusProcessId, roomPlacement } from './support/troupe.ts';
import { checkHistories, checkSockets } from './outage-support/check.ts';
import { outcome, Rig, SLOTS, type Outcome, type Send, type Slot } from './outage-support/rig.ts';

const scenarios = envList('BENCH_SCENARIOS', ['redis', 'kill', 'postgres', 'rolling'] as const);
const settings = {
  databaseUrl: envDatabaseUrl(), engine: envText('BENCH_ENGINE') ?? 'auto',
  conversations: envNumber('BENCH_CONVERSATIONS', 16, 1), thinkMs: envNumber('BENCH_THINK_MS', 300, 0),
  replyChunks: envNumber('BENCH_REPLY_CHUNKS', 8, 2), chunkDelayMs: envNumber('BENCH_CHUNK_DELAY_MS', 25, 0),
  readRate: envNumber('BENCH_READ_RATE', 10, 0), requestTimeoutMs: envNumber('BENCH_REQUEST_TIMEOUT_MS', 30_000, 100),
  warmupMs: envNumber('BENCH_WARMUP_MS', 4_000, 0), afterMs: envNumber('BENCH_AFTER_MS', 4_000, 0),
  recoveryCapMs: envNumber('BENCH_RECOVERY_CAP_MS', 40_000, 1_000), socketGraceMs: envNumber('BENCH_SOCKET_GRACE_MS', 1_500, 0),
  pgOutageMs: envNumber('BENCH_PG_OUTAGE_MS', 8_000, 100), rollingSettleMs: envNumber('BENCH_ROLLING_SETTLE_MS', 3_000, 0),
  logDir: RESULTS_DIR,
};
export type Settings = typeof settings;
const failovers = envRates('BENCH_FAILOVER_MS', '5000,2000').sort((a, b) => b - a);
const pgModes = envList('BENCH_PG_MODES', ['reset', 'blackhole'] as const);
const log = logger('bench:outages');
type Spread = { n: number; p50: number | null; p99: number | null; max: number | null };
const rounded = (v: number) => (Number.isFinite(v) ? Math.round(v) : null);
function spread(values: readonly number[]): Spread {
  const { count, p50, p99, max } = summarize(values);
  return { n: count, p50: rounded(p50), p99: rounded(p99), max: rounded(max) };
}
const took = (x: Outcome) => x.t1 - x.t0;
const tallied = (outcomes: readonly Outcome[]) => tally(outcomes, outcome);
const perSlot = <T>(f: (slot: Slot) => T): Record<Slot, T> => ({ A: f('A'), B: f('B') });
async function waitUntil(done: () => boolean, capMs: number): Promise<void> {
  for (const end = performance.now() + capMs; !done() && performance.now() < end; ) await sleep(100);
}
/** Per conversation in `convs`: ms from `since` to its first right 200 among the sends `which` picks; `missing`: none yet. */
function recovery(rig: Rig, convs: readonly number[], since: number, which: (s: Send) => boolean) {
  const oks = convs.map((conv) => rig.sends.filter((s) => s.conv === conv && s.status === 200 && s.answeredTag === s.tag && which(s)));
  const times = oks.filter((ok) => ok.length).map((ok) => Math.min(...ok.map((s) => s.t1)) - since);
  return { times, missing: convs.length - times.length };
}
/** Recovery through each slot of the messages sent from `since` on; `both`: per conversation, the later of the two. */
function bySlot(rig: Rig, convs: readonly number[], since: number) {
  const slots = perSlot((via) => recovery(rig, convs, since, (x) => x.via === via && x.t0 >= since));
  const both = convs.map((_, i) => Math.max(slots.A.times[i] ?? Number.NaN, slots.B.times[i] ?? Number.NaN)).filter(Number.isFinite);
  return { slots, both, missing: slots.A.missing + slots.B.missing };
}
/** Per slot, after `from`: when `/readyz` first failed, and when it answered 200 again (ms after `from`). */
function readiness(rig: Rig, from: number) {
  const after = (t?: number) => (t === undefined ? null : Math.round(t - from));
  return perSlot((via) => {
    const polls = rig.ready.filter((r) => r.via === via && r.t >= from);
    const down = polls.find((r) => !r.ok);
    return { notReadyAfterMs: after(down?.t), readyAgainAfterMs: after(down && polls.find((r) => r.t > down.t && r.ok)?.t) };
  });
}
/** How many lines, over every process, logged `msg`. */
const logLines = (rig: Rig, msg: string) =>
  rig.all.reduce((n, node) => n + node.troupe.child.output().split(`"msg":${JSON.stringify(msg)}`).length - 1, 0);
/** A fresh rig under load, its `fault`, then the checks; `fault` resolves with what to measure once every answer is in. */
async function scenario<T extends object>(name: string, options: Partial<{ proxyDatabase: boolean; failoverMs: number }>,
  fault: (rig: Rig, convs: number[]) => Promise<() => T>) {
  const rig = new Rig();
  try {
    await rig.start({ ...settings, proxyDatabase: false, failoverMs: 5_000, ...options });
    log(`${name}: ${rig.engine} engine, ${settings.conversations} conversations; load on, warming up ${settings.warmupMs} ms`);
    rig.startLoad();
    await sleep(settings.warmupMs);
    const tFault = rig.now();
    const measure = await fault(rig, rig.conversations.map((_, i) => i));
    await sleep(settings.afterMs);
    await rig.stop(settings.socketGraceMs);
    const histories = await Promise.all(rig.conversations.map((id) => rig.history(id)));
    const history = checkHistories(rig.sends, histories);
    const refused = rig.sends.filter((x) => x.status !== 200);
    const result = { scenario: name, engine: rig.engine, ...measure(), history, logFiles: [] as string[],
      sockets: checkSockets(rig.sends, histories, rig.sessions, settings.socketGraceMs), messages: tallied(rig.sends),
      replyBeforeFaultMs: spread(rig.sends.filter((x) => x.status === 200 && x.t1 <= tFault).map(took)),
      refusedMs: spread(refused.map(took)),
      // Refused before the fault are not its doing (so far: first messages of a new conversation through both processes at once).
      refusedBeforeFault: tallied(refused.filter((x) => x.t1 < tFault)), refusedFromFault: tallied(refused.filter((x) => x.t1 >= tFault)),
      reads: tallied(rig.reads), takeovers: logLines(rig, 'the process running an actor stopped its heartbeat; taking its actors over'),
      superseded: logLines(rig, 'conversation actor superseded by another process; disposing it') };
    // Logs are kept after a timeout, a lost, duplicated or reordered message, or a process that exited with a code.
    if (history.lost + history.duplicated + history.reordered + history.notAlternating + history.wrongReply > 0 ||
      refused.some((x) => x.code === 'timeout') || rig.all.some((node) => (node.troupe.child.exitInfo()?.code ?? null) !== null)) {
      await mkdir(settings.logDir, { recursive: true });
      for (const node of rig.all) {
        result.logFiles.push(join(settings.logDir, `${name.replace(/\W+/g, '-')}-${node.label}.log`));
        await writeFile(result.logFiles.at(-1)!, node.troupe.child.output());
      }
    }
    log(`${name}: ${JSON.stringify({ history, sockets: result.sockets })}`);
    return result;
  } finally {
    await rig.close();
  }
}
const redisRestart = () => scenario('redis restart', {}, async (rig, convs) => {
  const tFault = rig.now();
  const downMs = await rig.redis.restart();
  log(`redis restart: Redis down ${Math.round(downMs)} ms; waiting for every conversation to answer through both processes`);
  await waitUntil(() => bySlot(rig, convs, tFault).missing === 0, settings.recoveryCapMs);
  const unrecovered = bySlot(rig, convs, tFault).missing;
  return () => {
    const { slots, both } = bySlot(rig, convs, tFault);
    return { redisDownMs: Math.round(downMs), answersAgainAnyMs: spread(recovery(rig, convs, tFault, (x) => x.t0 >= tFault).times),
      answersAgainBothMs: spread(both), answersAgainViaMs: perSlot((s) => spread(slots[s].times)), unrecovered,
      messagesAfterFault: tallied(rig.sends.filter((x) => x.t0 >= tFault && x.t0 < tFault + 5_000)), readiness: readiness(rig, tFault) };
  };
});
const processKill = (failoverMs: number) => scenario(`SIGKILL, ACTOR_FAILOVER_MS=${failoverMs}`, { failoverMs }, async (rig, convs) => {
  const victim = rig.route.A;
  const placement = await roomPlacement(rig.redis.url);
  const victimId = colyseusProcessId(victim.troupe.child.output()); // logged before `troupe listening`
  const owned = convs.filter((conv) => placement.get(rig.conversations[conv]!) === victimId);
  const inFlight = rig.inFlight(victim.label);
  const tKill = rig.now();
  await victim.troupe.child.stop(0, 'SIGKILL');
  log(`SIGKILL: killed ${victim.label} (${owned.length} of ${convs.length} actors on it, ${inFlight.length} messages in flight to it)`);
  const failover = () => recovery(rig, owned, tKill, (x) => x.via === 'B' && x.t1 > tKill);
  await waitUntil(() => failover().missing === 0, settings.recoveryCapMs);
  const notTakenOver = failover().missing;
  return () => {
    const others = (x: Send) => !owned.includes(x.conv) && x.via === 'B' && x.t1 > tKill && x.t0 < tKill + failoverMs;
    return { failoverMs, actorsOnKilled: owned.length, inFlightToKilled: { n: inFlight.length, outcomes: tallied(inFlight) },
      failoverTimeMs: spread(failover().times), notTakenOver, otherConversationsReplyMs: spread(rig.sends.filter(others).map(took)) };
  };
});
const postgresOutage = (mode: 'reset' | 'blackhole') => scenario(`PostgreSQL ${mode}`, { proxyDatabase: true }, async (rig, convs) => {
  const tCut = rig.now();
  await rig.pgProxy!.cut(mode);
  await sleep(settings.pgOutageMs);
  const tRestore = rig.now();
  await rig.pgProxy!.restore();
  log(`PostgreSQL ${mode}: cut for ${Math.round(tRestore - tCut)} ms; waiting for every conversation to answer again`);
  await waitUntil(() => bySlot(rig, convs, tRestore).missing === 0, settings.recoveryCapMs);
  const unrecovered = bySlot(rig, convs, tRestore).missing;
  return () => {
    const during = (x: Outcome) => x.t0 >= tCut && x.t0 < tRestore;
    const latency503 = (xs: Outcome[]) => spread(xs.filter((x) => during(x) && x.status === 503).map(took));
    const historyReads = rig.reads.filter((x) => x.kind === 'conversation');
    // Requests that need the database started during the outage; a 200 was served without it, or held until it came back.
    const needDb = [...rig.sends, ...historyReads].filter(during);
    const ok = needDb.filter((x) => x.status === 200);
    const strays = rig.sends.filter((x) => x.t0 < tCut && x.t1 > tCut);
    const readBack = (via: Slot) =>
      rounded(Math.min(...historyReads.filter((r) => r.via === via && r.status === 200 && r.t0 >= tRestore).map((r) => r.t1)) - tRestore);
    return { outageMs: Math.round(tRestore - tCut),
      during: { messages: tallied(rig.sends.filter(during)), conversationReads: tallied(historyReads.filter(during)),
        characterReads: tallied(rig.reads.filter((x) => during(x) && x.kind === 'character')) },
      okDuring: { beforeRestore: ok.filter((x) => x.t1 < tRestore).length, heldUntilAfter: ok.filter((x) => x.t1 >= tRestore).length },
      heldMs: spread(ok.map(took)), anyAnswerMs: spread(needDb.map(took)), latency503Ms: latency503([...rig.sends, ...rig.reads]),
      readLatency503Ms: latency503(rig.reads), messageLatency503Ms: latency503(rig.sends),
      inFlightAtCut: { n: strays.length, outcomes: tallied(strays), slowestMs: rounded(Math.max(...strays.map((x) => x.t1 - tCut))) },
      messagesBackMs: spread(bySlot(rig, convs, tRestore).both), unrecovered,
      readsBackMs: perSlot(readBack), readiness: readiness(rig, tCut) };
  };
});
const rollingRestart = () => scenario('rolling restart', {}, async (rig) => {
  const steps: { tTerm: number; node: string; drainMs: number; exitCode: number | null; inFlight: Send[]; startMs: number }[] = [];
  for (const slot of SLOTS) {
    const node = rig.route[slot];
    rig.route[slot] = rig.route[slot === 'A' ? 'B' : 'A']; // out of rotation first, as a balancer does
    const inFlight = rig.inFlight(node.label);
    const tTerm = rig.now();
    const { code } = await node.troupe.child.stop(60_000);
    const drainMs = Math.round(rig.now() - tTerm);
    await waitUntil(() => inFlight.every((x) => x.t1 >= 0), 5_000);
    const started = rig.now();
    const next = await rig.startSlot(slot);
    steps.push({ tTerm, node: node.label, drainMs, exitCode: code, inFlight, startMs: Math.round(rig.now() - started) });
    log(`rolling restart: ${node.label} drained in ${drainMs} ms (exit ${code}); ${next.label} up in ${steps.at(-1)!.startMs} ms`);
    await sleep(settings.rollingSettleMs);
  }
  // refusedMeanwhile: messages refused from SIGTERM until the next process was up, wherever they went.
  return () => ({ steps: steps.map(({ tTerm, inFlight, ...s }) => ({ ...s, inFlight: inFlight.length, inFlightOutcomes: tallied(inFlight),
    refusedMeanwhile: tallied(rig.sends.filter((x) => x.status !== 200 && x.t0 >= tTerm && x.t0 < tTerm + s.drainMs + s.startMs)) })) });
});
type Result = Awaited<ReturnType<typeof redisRestart | typeof processKill | typeof postgresOutage | typeof rollingRestart>>;
const ms = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${v} ms`);
const p50max = (s: Spread) => (s.n === 0 ? '–' : `${ms(s.p50)} / ${ms(s.max)}`);
const p50p99max = (s: Spread) => (s.n === 0 ? '–' : `${ms(s.p50)} / ${ms(s.p99)} / ${ms(s.max)} (n=${s.n})`);
const counts = (c: Record<string, number>, skip = '200') =>
  Object.entries(c).filter(([k]) => k !== skip).map(([k, n]) => `${n}× ${k}`).join(', ') || 'none';
const readyCells = (r: ReturnType<typeof readiness>) => SLOTS.map(
  (s) => (r[s].notReadyAfterMs === null ? 'stayed 200' : `${ms(r[s].notReadyAfterMs)} / ${ms(r[s].readyAgainAfterMs)}`)).join('; ');
const storedCodes = (h: Result['history']) =>
  Object.entries(h.refusedStoredByCode).map(([code, n]) => `${code}: ${n.answered} / ${n.unanswered}`).join('; ').replace(/.+/, ' ($&)');
function markdown(results: readonly Result[]): string {
  const out: string[] = [];
  // `header`: the column titles, separated by " | ".
  const table = <R extends Result>(title: string, header: string, rows: R[], cells: (r: R) => (string | number)[][]) =>
    rows.length && out.push(title, markdownTable(header.split(' | '), rows.flatMap(cells)));
  table('**Redis restarted empty** (SIGKILL, started again on the same port):', 'Redis down | every conversation answers again, ' +
    'p50 / max | through both processes, p50 / max | not answering at the end | messages in the 5 s after: not 200 | conversations ' +
    'with two actors (history not alternating) | log lines: "taking its actors over" / "actor superseded" | /readyz 503 after / ' +
    '200 again after (A; B)', results.filter((r) => 'redisDownMs' in r), (r) => [[ms(r.redisDownMs), p50max(r.answersAgainAnyMs),
    p50max(r.answersAgainBothMs), r.unrecovered, counts(r.messagesAfterFault), r.history.notAlternating, `${r.takeovers} / ${r.superseded}`,
    readyCells(r.readiness)]]);
  table('**A Troupe process killed with SIGKILL** (time from the kill to the first reply through the other process, per conversation ' +
    'whose actor ran on the killed one):', 'ACTOR_FAILOVER_MS | actors on the killed process | failover p50 / max | not taken over | ' +
    "other conversations' replies meanwhile, p50 / max | messages in flight to the killed process",
    results.filter((r) => 'actorsOnKilled' in r), (r) => [[r.failoverMs, r.actorsOnKilled, p50max(r.failoverTimeMs), r.notTakenOver,
      p50max(r.otherConversationsReplyMs), `${r.inFlightToKilled.n}: ${counts(r.inFlightToKilled.outcomes, '')}`]]);
  table('**PostgreSQL outage** (cut at a TCP proxy; latency of the 503 answers to requests started during the outage, p50 / p99 / max):',
    'mode | outage | 503 latency, history reads | 503 latency, messages | held, then 200 after the restore: n (p50 / max) | every ' +
    'answer to a database request, p50 / p99 / max | answers during the outage (other than 503) | in flight at the cut | after ' +
    'restore: every conversation answers, p50 / max | history reads 200 again (A; B) | /readyz 503 after cut / 200 after cut (A; B)',
    results.filter((r) => 'latency503Ms' in r), (r) => [[r.scenario.replace('PostgreSQL ', ''), ms(r.outageMs),
      p50p99max(r.readLatency503Ms), p50p99max(r.messageLatency503Ms), `${r.okDuring.heldUntilAfter} (${p50max(r.heldMs)})`,
      p50p99max(r.anyAnswerMs), `messages: ${counts(r.during.messages, '503 database_unavailable')}; history reads: ` +
      `${counts(r.during.conversationReads, '503 database_unavailable')}; character reads (cached): ${counts(r.during.characterReads, '')}`,
      `${r.inFlightAtCut.n}: ${counts(r.inFlightAtCut.outcomes, '')}; last answered ${ms(r.inFlightAtCut.slowestMs)} after the cut`,
      `${p50max(r.messagesBackMs)}${r.unrecovered ? ` (${r.unrecovered} not)` : ''}`, `${ms(r.readsBackMs.A)}; ${ms(r.readsBackMs.B)}`,
      readyCells(r.readiness)]]);
  table('**Rolling restart** (SIGTERM to one process while replies stream, its traffic sent to the other, a new process started, then ' +
    'the other one):', 'process | drain: SIGTERM to exit | exit code | messages in flight to it | their answers | new process listening ' +
    'after | messages refused from SIGTERM until then (any process)', results.filter((r) => 'steps' in r),
    (r) => r.steps.map((s) => [s.node, ms(s.drainMs), String(s.exitCode), s.inFlight, counts(s.inFlightOutcomes, ''), ms(s.startMs),
      counts(s.refusedMeanwhile, '')]));
  table('**Messages lost, duplicated or reordered** (goal: 0 in every column from "lost" on):', 'scenario | reply time before the ' +
    'fault, p50 / p99 | sent | 200 | refused, answered before the fault | refused, answered from the fault on (slowest of all) | ' +
    'refused, not stored | refused but stored (answered / unanswered) | lost: 200 but its reply not stored | 200 carrying another ' +
    "message's reply | duplicated | reordered | histories not alternating", [...results], ({ scenario: name, history: h, ...r }) => [[name,
    `${ms(r.replyBeforeFaultMs.p50)} / ${ms(r.replyBeforeFaultMs.p99)}`, h.sent, h.answered, counts(r.refusedBeforeFault, ''),
    `${counts(r.refusedFromFault, '')}${r.refusedMs.n ? ` (${ms(r.refusedMs.max)})` : ''}`, h.refused - h.refusedStoredAnswered -
    h.refusedStoredUnanswered, `${h.refusedStoredAnswered} / ${h.refusedStoredUnanswered}${storedCodes(h)}`, h.lost, h.wrongReply,
    h.duplicated, h.reordered, h.notAlternating]]);
  table('**WebSocket streams** (one socket per conversation on each process; a reply is expected when its message was sent after the ' +
    'socket was ready and answered while it stayed open):', 'scenario | sockets | replies expected | missed | incomplete | duplicated | ' +
    'reordered | done but not stored | error events', [...results], ({ scenario: name, sockets: s }) => [[name, s.sessions, s.expected,
    s.missed, s.incomplete, s.duplicated, s.reordered, s.phantom, counts(s.errors, '')]]);
  return out.join('\n\n');
}
runBench('bench:outages', envNumber('BENCH_MAX_RUN_SEC', 600, 30) * 1000, async ({ stamp, started }) => {
  settings.logDir = join(settings.logDir, `outages-${stamp}-logs`);
  const results: Result[] = [];
  const failures: { scenario: string; error: string }[] = [];
  // One broken scenario still leaves the others' numbers; it is reported, and the exit code says so.
  const attempt = (name: string, run: () => Promise<Result>) => run().then((r) => void results.push(r), (err: Error) => {
    log(`${name} failed: ${err.stack ?? String(err)}`);
    failures.push({ scenario: name, error: String(err.message ?? err) });
  });
  for (const name of scenarios) {
    if (name === 'redis') await attempt('redis', redisRestart);
    if (name === 'kill') for (const ms of failovers) await attempt(`kill ${ms}`, () => processKill(ms));
    if (name === 'postgres') for (const mode of pgModes) await attempt(`postgres ${mode}`, () => postgresOutage(mode));
    if (name === 'rolling') await attempt('rolling', rollingRestart);
  }
  const host = machine();
  const s = settings;
  const report = `${markdown(results)}\n\n${results[0]?.engine ?? '?'} engine; ${s.conversations} conversations, ` +
    `${s.replyChunks} chunks × ${s.chunkDelayMs} ms per reply, ${s.thinkMs} ms between rounds, ${s.readRate} reads/s per process; ` +
    `${host.cpus} CPUs (${host.cpuModel}), node ${host.node}; ${Math.round((Date.now() - started) / 1000)} s in all.`;
  process.stdout.write(`\n${report}\n`);
  for (const f of failures) process.stdout.write(`\nFAILED: ${f.scenario}: ${f.error}\n`);
  for (const r of results) for (const f of r.logFiles) process.stdout.write(`${r.scenario}: Troupe log kept in ${f}\n`);
  const config = { ...settings, databaseUrl: redactUrl(settings.databaseUrl), scenarios, failovers, pgModes };
  const json = { benchmark: 'outages', stamp, config, machine: host, git: await gitState(), results, failures };
  log(`wrote ${(await writeResults('outages', stamp, json, report)).json}`);
  process.exitCode = failures.length > 0 ? 1 : 0;
});
