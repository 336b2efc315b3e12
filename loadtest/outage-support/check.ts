/**
 * Were messages lost, duplicated or reordered? Each stored history against what the load sent and
 * was told (a 200 must be stored once, followed at once by its reply, in round order), and each
 * socket's stream against the history: a reply to a message sent after `ready` and answered
 * `graceMs` before the socket closed must arrive whole, once, in history order.
 */
import { echoedMessage as replyTag } from '../support/upstream.ts';
import { parseTag, type Send, type Session } from './load.ts';

export type StoredMessage = { role: string; content: string };

export type HistoryCheck = ReturnType<typeof checkHistories>;
export type SocketCheck = ReturnType<typeof checkSockets>;

export function checkHistories(sends: readonly Send[], histories: readonly StoredMessage[][]) {
  // refusedStoredByCode: refused messages stored anyway, answered / not, by the code the sender got; wrongReply: a 200
  // carrying another message's reply; unknown: stored player messages not the load's; excerpts: where alternation breaks.
  const c = {
    sent: 0, answered: 0, refused: 0, refusedStoredAnswered: 0, refusedStoredUnanswered: 0, refusedStoredByCode: {} as Record<string,
    { answered: number; unanswered: number }>,
    lost: 0, duplicated: 0, reordered: 0, wrongReply: 0, notAlternating: 0, unknown: 0, examples: [] as string[],
    excerpts: [] as { conv: number; at: number; messages: string[] }[],
  };
  const note = (text: string) => void (c.examples.length < 12 && c.examples.push(text));
  const byTag = new Map(sends.map((s) => [s.tag, s]));
  for (const s of sends) {
    c.sent++;
    if (s.status === 200) c.answered++;
    else c.refused++;
    if (s.status === 200 && s.answeredTag !== s.tag) {
      c.wrongReply++;
      note(`${s.tag}: its 200 carried the reply to ${s.answeredTag}`);
    }
  }
  histories.forEach((history, conv) => {
    const stored = new Map<string, number>();
    const replied = new Map<string, number>();
    let alternating = true;
    let firstBreak = -1;
    let lastRound = -1;
    history.forEach((m, i) => {
      if (!alternating && firstBreak < 0) firstBreak = Math.max(0, i - 1);
      if (m.role === 'player') {
        stored.set(m.content, (stored.get(m.content) ?? 0) + 1);
        const send = byTag.get(m.content);
        const tag = parseTag(m.content);
        if (!send || !tag) return void c.unknown++;
        if (send.status !== 200) return;
        if (tag.round < lastRound) {
          c.reordered++;
          note(`c${conv}: ${m.content} stored after a message of round ${lastRound}`);
        }
        lastRound = Math.max(lastRound, tag.round);
        const next = history[i + 1];
        if (next?.role !== 'character' || replyTag(next.content) !== m.content) alternating = false;
      } else {
        const tag = replyTag(m.content) ?? '?';
        replied.set(tag, (replied.get(tag) ?? 0) + 1);
        const prev = history[i - 1];
        if (prev?.role !== 'player' || prev.content !== tag) {
          c.reordered++;
          alternating = false;
          note(`c${conv}: the reply to ${tag} at #${i} follows ${prev ? `${prev.role} ${prev.content.slice(0, 20)}` : 'nothing'}`);
        }
      }
    });
    if (!alternating) {
      c.notAlternating++;
      const at = firstBreak < 0 ? history.length - 1 : firstBreak;
      const short = (m: StoredMessage) =>
        m.role === 'player' ? `player ${m.content}` : `character ${m.content.split(' ').slice(0, 2).join(' ')}…`;
      if (c.excerpts.length < 4) c.excerpts.push({ conv, at, messages: history.slice(Math.max(0, at - 3), at + 17).map(short) });
    }
    for (const [tag, n] of [...stored, ...replied]) {
      if (n > 1) {
        c.duplicated += n - 1;
        note(`c${conv}: ${tag} stored ${n} times`);
      }
    }
    for (const s of sends.filter((x) => x.conv === conv)) {
      const isStored = stored.has(s.tag);
      const isReplied = replied.has(s.tag);
      if (s.status === 200 && (!isStored || !isReplied)) {
        c.lost++;
        note(`c${conv}: ${s.tag} answered 200 but ${isStored ? 'its reply is' : 'it is'} not stored`);
      } else if (s.status !== 200 && isStored) {
        const byCode = (c.refusedStoredByCode[`${s.status ?? ''} ${s.code ?? ''}`.trim()] ??= { answered: 0, unanswered: 0 });
        if (isReplied) c.refusedStoredAnswered++;
        else c.refusedStoredUnanswered++;
        if (isReplied) byCode.answered++;
        else byCode.unanswered++;
      }
    }
  });
  return c;
}

/** A reply whose start a socket missed is the one streaming when it subscribed if it began this soon after. */
const JOINED_MID_REPLY_MS = 2_000;

export function checkSockets(sends: readonly Send[], histories: readonly StoredMessage[][], sessions: readonly Session[], graceMs: number) {
  const c = { sessions: 0, expected: 0, received: 0, missed: 0, incomplete: 0, duplicated: 0, reordered: 0, phantom: 0,
    errors: {} as Record<string, number>, examples: [] as string[] };
  const note = (text: string) => void (c.examples.length < 12 && c.examples.push(text));
  // Where each stored reply sits in its history, and its text.
  const replies = (history: StoredMessage[]) =>
    history.flatMap((m, i) => (m.role === 'character' ? [[replyTag(m.content) ?? '?', { i, text: m.content }] as const] : []));
  const position = histories.map((history) => new Map(replies(history)));
  for (const s of sessions) {
    for (const [code, n] of Object.entries(s.errors)) c.errors[code] = (c.errors[code] ?? 0) + n;
    if (s.tReady === null) continue;
    c.sessions++;
    const stored = position[s.conv] ?? new Map<string, { i: number; text: string }>();
    const seen = new Map<string, number>();
    for (const r of s.replies.values()) {
      const tag = replyTag(r.text.trimStart()) ?? '?';
      if (r.dones.length === 0) continue;
      // Subscribed while this reply was streaming: it got the rest of it, as it should.
      if (tag === '?' && r.tFirst - s.tReady < JOINED_MID_REPLY_MS) continue;
      c.received++;
      seen.set(tag, (seen.get(tag) ?? 0) + r.dones.length);
      const at = stored.get(tag);
      if (!at) {
        c.phantom++;
        note(`${s.node} socket c${s.conv}: done for ${tag}, which is not stored`);
      } else if (r.text !== at.text) {
        c.incomplete++;
        note(`${s.node} socket c${s.conv}: ${tag} arrived as ${JSON.stringify(r.text.slice(0, 60))}`);
      }
    }
    for (const n of seen.values()) c.duplicated += Math.max(0, n - 1);
    const indexOf = (id: string) => stored.get(replyTag(s.replies.get(id)?.text.trimStart() ?? '') ?? '?')?.i ?? -1;
    const order = s.doneOrder.map(indexOf).filter((i) => i >= 0);
    order.forEach((i, k) => {
      if (k > 0 && i < (order[k - 1] as number)) {
        c.reordered++;
        note(`${s.node} socket c${s.conv}: a reply arrived after a later one`);
      }
    });
    const until = s.tClose ?? Number.POSITIVE_INFINITY;
    for (const send of sends) {
      if (send.conv !== s.conv || send.status !== 200 || send.t0 <= s.tReady || send.t1 + graceMs >= until) continue;
      c.expected++;
      if (!seen.has(send.tag)) {
        c.missed++;
        const times = `sent ${Math.round(send.t0)}, answered ${Math.round(send.t1)}`;
        note(`${s.node} socket c${s.conv} (ready ${Math.round(s.tReady)} ms): no reply to ${send.tag} (${times})`);
      }
    }
  }
  return c;
}

/**
 * Messages whose sender was not told 200, other than connection refused (a dead process): what
 * they were told, when (sentMs: after the fault), how long it took, and what was stored. Timeouts first.
 */
export function incidents(sends: readonly Send[], histories: readonly StoredMessage[][], tFault: number, max = 40) {
  const stored = new Set(histories.flat().filter((m) => m.role === 'player').map((m) => m.content));
  const answered = new Set(histories.flat().filter((m) => m.role === 'character').map((m) => replyTag(m.content)));
  return sends
    .filter((s) => s.status !== 200 && s.code !== 'ECONNREFUSED' && s.code !== 'no_process')
    .sort((a, b) => Number(b.code === 'timeout') - Number(a.code === 'timeout') || a.t0 - b.t0)
    .slice(0, max)
    .map((s) => ({
      tag: s.tag,
      node: s.node,
      answer: s.status === null ? String(s.code) : `${s.status} ${s.code ?? ''}`.trim(),
      sentMs: Math.round(s.t0 - tFault),
      tookMs: Math.round(s.t1 - s.t0),
      stored: stored.has(s.tag),
      answered: answered.has(s.tag),
    }));
}
