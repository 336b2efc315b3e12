/** Markdown tables of an outages run: one per kind of outage, then what was lost, duplicated or reordered. */
import { markdownTable } from '../support/report.ts';
import type { HistoryCheck, SocketCheck } from './check.ts';
import type { postgresOutage, processKill, redisRestart, rollingRestart, Spread } from './scenarios.ts';

type Redis = Awaited<ReturnType<typeof redisRestart>>;
type Kill = Awaited<ReturnType<typeof processKill>>;
type Postgres = Awaited<ReturnType<typeof postgresOutage>>;
type Rolling = Awaited<ReturnType<typeof rollingRestart>>;
export type ScenarioResult = Redis | Kill | Postgres | Rolling;

const ms = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${v} ms`);
const p50max = (s: Spread) => (s.n === 0 ? '–' : `${ms(s.p50)} / ${ms(s.max)}`);
const p50p99max = (s: Spread) => (s.n === 0 ? '–' : `${ms(s.p50)} / ${ms(s.p99)} / ${ms(s.max)} (n=${s.n})`);
const counts = (c: Record<string, number>, skip = '200') =>
  Object.entries(c).filter(([k]) => k !== skip).map(([k, n]) => `${n}× ${k}`).join(', ') || 'none';

export function markdown(results: readonly ScenarioResult[]): string {
  const out: string[] = [];
  const redis = results.filter((r): r is Redis => 'redisDownMs' in r);
  if (redis.length) {
    out.push('**Redis restarted empty** (SIGKILL, started again on the same port):');
    out.push(markdownTable(
      ['Redis down', 'every conversation answers again, p50 / max', 'through both processes, p50 / max', 'not answering at the end',
        'messages in the 5 s after: not 200', 'conversations with two actors (history not alternating)',
        'log lines: "taking its actors over" / "actor superseded"', '/readyz 503 after / 200 again after (A; B)'],
      redis.map((r) => [ms(r.redisDownMs), p50max(r.answersAgainAnyMs), p50max(r.answersAgainBothMs), r.unrecovered,
        counts(r.messagesAfterFault), r.history.notAlternating, `${r.takeovers} / ${r.superseded}`, readyCells(r.readiness)]),
    ));
  }
  const kills = results.filter((r): r is Kill => 'actorsOnKilled' in r);
  if (kills.length) {
    out.push('**A Troupe process killed with SIGKILL** (time from the kill to the first reply through the other process, ' +
      'per conversation whose actor ran on the killed one):');
    out.push(markdownTable(
      ['ACTOR_FAILOVER_MS', 'actors on the killed process', 'failover p50 / max', 'not taken over',
        "other conversations' replies meanwhile, p50 / max", 'messages in flight to the killed process'],
      kills.map((r) => [r.failoverMs, r.actorsOnKilled, p50max(r.failoverTimeMs), r.notTakenOver, p50max(r.otherConversationsReplyMs),
        `${r.inFlightToKilled.n}: ${counts(r.inFlightToKilled.outcomes, '')}`]),
    ));
  }
  const pg = results.filter((r): r is Postgres => 'latency503Ms' in r);
  if (pg.length) {
    out.push('**PostgreSQL outage** (cut at a TCP proxy; latency of the 503 answers to requests started during the outage, ' +
      'p50 / p99 / max):');
    out.push(markdownTable(
      ['mode', 'outage', '503 latency, history reads', '503 latency, messages', 'held, then 200 after the restore: n (p50 / max)',
        'every answer to a database request, p50 / p99 / max', 'answers during the outage (other than 503)', 'in flight at the cut',
        'after restore: every conversation answers, p50 / max', 'history reads 200 again (A; B)',
        '/readyz 503 after cut / 200 after cut (A; B)'],
      pg.map((r) => [
        r.scenario.replace('PostgreSQL ', ''),
        ms(r.outageMs),
        p50p99max(r.readLatency503Ms),
        p50p99max(r.messageLatency503Ms),
        `${r.okDuring.heldUntilAfter} (${p50max(r.heldMs)})`,
        p50p99max(r.anyAnswerMs),
        `messages: ${counts(r.during.messages, '503 database_unavailable')}; history reads: ${counts(r.during.conversationReads,
          '503 database_unavailable')}; character reads (cached): ${counts(r.during.characterReads, '')}`,
        `${r.inFlightAtCut.n}: ${counts(r.inFlightAtCut.outcomes, '')}; last answered ${ms(r.inFlightAtCut.slowestMs)} after the cut`,
        `${p50max(r.messagesBackMs)}${r.unrecovered ? ` (${r.unrecovered} not)` : ''}`,
        `${ms(r.readsBackMs.A)}; ${ms(r.readsBackMs.B)}`,
        readyCells(r.readiness),
      ]),
    ));
  }
  const rolling = results.filter((r): r is Rolling => 'steps' in r);
  if (rolling.length) {
    out.push('**Rolling restart** (SIGTERM to one process while replies stream, its traffic sent to the other, ' +
      'a new process started, then the other one):');
    out.push(markdownTable(
      ['process', 'drain: SIGTERM to exit', 'exit code', 'messages in flight to it', 'their answers', 'new process listening after',
        'messages refused from SIGTERM until then (any process)'],
      rolling.flatMap((r) => r.steps.map((s) => [s.node, ms(s.drainMs), String(s.exitCode), s.inFlight, counts(s.inFlightOutcomes, ''),
        ms(s.startMs), counts(s.refusedMeanwhile, '')])),
    ));
  }
  out.push('**Messages lost, duplicated or reordered** (goal: 0 in every column from "lost" on):');
  out.push(markdownTable(
    ['scenario', 'reply time before the fault, p50 / p99', 'sent', '200', 'refused, answered before the fault',
      'refused, answered from the fault on (slowest of all)', 'refused, not stored', 'refused but stored (answered / unanswered)',
      'lost: 200 but its reply not stored', "200 carrying another message's reply", 'duplicated', 'reordered', 'histories not alternating'],
    results.map((r) => historyRow(r.scenario, `${ms(r.replyBeforeFaultMs.p50)} / ${ms(r.replyBeforeFaultMs.p99)}`, r.history,
      counts(r.refusedBeforeFault, ''), `${counts(r.refusedFromFault, '')}${r.refusedMs.n ? ` (${ms(r.refusedMs.max)})` : ''}`)),
  ));
  out.push('**WebSocket streams** (one socket per conversation on each process; a reply is expected when its message was sent ' +
    'after the socket was ready and answered while it stayed open):');
  out.push(markdownTable(
    ['scenario', 'sockets', 'replies expected', 'missed', 'incomplete', 'duplicated', 'reordered', 'done but not stored', 'error events'],
    results.map((r) => socketRow(r.scenario, r.sockets)),
  ));
  return out.join('\n\n');
}

function readyCells(r: Record<string, { notReadyAfterMs: number | null; readyAgainAfterMs: number | null }>): string {
  const cell = (slot: string) => `${ms(r[slot]?.notReadyAfterMs)} / ${ms(r[slot]?.readyAgainAfterMs)}`;
  return ['A', 'B'].map((slot) => (r[slot]?.notReadyAfterMs === null ? 'stayed 200' : cell(slot))).join('; ');
}

function historyRow(name: string, before: string, h: HistoryCheck, early: string, refusals: string): (string | number)[] {
  return [name, before, h.sent, h.answered, early, refusals, h.refused - h.refusedStoredAnswered - h.refusedStoredUnanswered,
    `${h.refusedStoredAnswered} / ${h.refusedStoredUnanswered}${storedCodes(h)}`, h.lost, h.wrongReply, h.duplicated, h.reordered,
    h.notAlternating];
}

function storedCodes(h: HistoryCheck): string {
  const parts = Object.entries(h.refusedStoredByCode).map(([code, n]) => `${code}: ${n.answered} / ${n.unanswered}`);
  return parts.length ? ` (${parts.join('; ')})` : '';
}

function socketRow(name: string, s: SocketCheck): (string | number)[] {
  return [name, s.sessions, s.expected, s.missed, s.incomplete, s.duplicated, s.reordered, s.phantom, counts(s.errors, '')];
}
