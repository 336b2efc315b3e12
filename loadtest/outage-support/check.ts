/**
 * Were messages lost, duplicated or reordered? Each stored history against what the load sent and was told (a 200 must be
 * stored once, followed at once by its reply, in round order), and each socket's stream against the history: a reply to a
 * message sent after `ready` and answered `graceMs` before the socket closed must arrive whole, once, in history order. */
import { echoedMessage as replyTag } from '../support/upstream.ts';
import { bump, outcome, type Send, type Session, type StoredMessage } from './rig.ts';

export function checkHistories(sends: readonly Send[], histories: readonly StoredMessage[][]) {
  // refusedStoredByCode: refused but stored, answered / not, by what the sender was told; wrongReply: a 200 carrying another
  // message's reply; unknown: stored player messages that are not the load's.
  const answered = sends.filter((s) => s.status === 200);
  const c = { sent: sends.length, answered: answered.length, refused: sends.length - answered.length, refusedStoredAnswered: 0,
    refusedStoredUnanswered: 0, refusedStoredByCode: {} as Record<string, { answered: number; unanswered: number }>, lost: 0,
    duplicated: 0, reordered: 0, wrongReply: answered.filter((s) => s.answeredTag !== s.tag).length, notAlternating: 0, unknown: 0 };
  const byTag = new Map(sends.map((s) => [s.tag, s]));
  histories.forEach((history, conv) => {
    const stored: Record<string, number> = {};
    const replied: Record<string, number> = {};
    let alternating = true;
    let lastRound = -1;
    history.forEach((m, i) => {
      if (m.role !== 'player') {
        const tag = replyTag(m.content) ?? '?';
        bump(replied, tag);
        const prev = history[i - 1];
        if (prev?.role !== 'player' || prev.content !== tag) {
          c.reordered++;
          alternating = false;
        }
        return;
      }
      bump(stored, m.content);
      const send = byTag.get(m.content);
      if (!send) return void c.unknown++;
      if (send.status !== 200) return;
      if (send.round < lastRound) c.reordered++;
      lastRound = Math.max(lastRound, send.round);
      const next = history[i + 1];
      if (next?.role !== 'character' || replyTag(next.content) !== m.content) alternating = false;
    });
    if (!alternating) c.notAlternating++;
    for (const n of [...Object.values(stored), ...Object.values(replied)]) c.duplicated += Math.max(0, n - 1);
    for (const s of sends.filter((x) => x.conv === conv)) {
      if (s.status === 200 && !(stored[s.tag] && replied[s.tag])) c.lost++;
      if (s.status === 200 || !stored[s.tag]) continue;
      (c.refusedStoredByCode[outcome(s)] ??= { answered: 0, unanswered: 0 })[replied[s.tag] ? 'answered' : 'unanswered']++;
      c[replied[s.tag] ? 'refusedStoredAnswered' : 'refusedStoredUnanswered']++;
    }
  });
  return c;
}
/** A reply whose start a socket missed is the one streaming when it subscribed if it began this soon after. */
const JOINED_MID_REPLY_MS = 2_000;
export function checkSockets(sends: readonly Send[], histories: readonly StoredMessage[][], sessions: readonly Session[], graceMs: number) {
  const c = { sessions: 0, expected: 0, received: 0, missed: 0, incomplete: 0, duplicated: 0, reordered: 0, phantom: 0,
    errors: {} as Record<string, number> };
  // Per conversation, each stored reply by its tag: where it sits in the history, and its text.
  const stored = histories.map((h) =>
    new Map(h.flatMap((m, i) => (m.role === 'player' ? [] : [[replyTag(m.content) ?? '?', { i, text: m.content }] as const]))));
  for (const s of sessions) {
    for (const [code, n] of Object.entries(s.errors)) bump(c.errors, code, n);
    const ready = s.tReady;
    if (ready === null) continue;
    c.sessions++;
    const replies = stored[s.conv] ?? new Map<string, { i: number; text: string }>();
    const tagOf = (text = '') => replyTag(text.trimStart()) ?? '?';
    const seen: Record<string, number> = {};
    for (const r of s.replies.values()) {
      // Subscribed while this reply was streaming: it got the rest of it, as it should.
      if (r.dones === 0 || (tagOf(r.text) === '?' && r.tFirst - ready < JOINED_MID_REPLY_MS)) continue;
      c.received++;
      bump(seen, tagOf(r.text), r.dones);
      const at = replies.get(tagOf(r.text));
      if (!at) c.phantom++;
      else if (r.text !== at.text) c.incomplete++;
    }
    for (const n of Object.values(seen)) c.duplicated += n - 1;
    const order = s.doneOrder.map((id) => replies.get(tagOf(s.replies.get(id)?.text))?.i ?? -1).filter((i) => i >= 0);
    c.reordered += order.filter((i, k) => k > 0 && i < (order[k - 1] as number)).length;
    const until = s.tClose ?? Number.POSITIVE_INFINITY;
    const expected = sends.filter((x) => x.conv === s.conv && x.status === 200 && x.t0 > ready && x.t1 + graceMs < until);
    c.expected += expected.length;
    c.missed += expected.filter((x) => !seen[x.tag]).length;
  }
  return c;
}
