/**
 * What the load sends and what the fake upstream answers, so a history can be checked: every
 * player message is a unique tag (conversation, round, the slot it went through), and every
 * reply is `Re: <tag>` and some words, one chunk each, so each reply names the message it answers.
 */

/** The player message of conversation `conv`, round `round`, sent through `slot`. */
export function messageTag(conv: number, round: number, slot: string): string {
  return `c${String(conv).padStart(2, '0')}-r${String(round).padStart(4, '0')}-${slot}`;
}

const TAG = /^c(\d+)-r(\d+)-([AB])$/;

export function parseTag(tag: string): { conv: number; round: number; slot: string } | null {
  const m = TAG.exec(tag);
  return m ? { conv: Number(m[1]), round: Number(m[2]), slot: String(m[3]) } : null;
}

const WORDS = ['and', 'so', 'the', 'story', 'goes', 'on', 'for', 'a', 'while', 'longer'];

/** The reply to the last user message of a chat request: `Re: <its text>` plus words, `chunks` tokens in all. */
export function replyFor(body: Record<string, unknown>, chunks: number): string {
  const messages = Array.isArray(body.messages) ? (body.messages as { role?: unknown; content?: unknown }[]) : [];
  const last = messages.findLast((m) => m.role === 'user');
  const said = typeof last?.content === 'string' ? last.content : '?';
  const words = Array.from({ length: Math.max(0, chunks - 2) }, (_, i) => WORDS[i % WORDS.length]);
  return ['Re:', said, ...words].join(' ');
}

/** The tag a character reply answers, or null when it is not one of ours. */
export function replyTag(content: string): string | null {
  const m = /^Re: (\S+)/.exec(content);
  return m ? (m[1] ?? null) : null;
}
