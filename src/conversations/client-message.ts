/** The longest player message or analysis question accepted. */
export const MAX_CONTENT_CHARS = 32_000;

export type ClientMessage =
  | { kind: 'say'; content: string; mode: 'conversation' | 'analysis' }
  | { kind: 'capability_result'; callId: string; result: unknown }
  | { kind: 'invalid'; message: string };

/**
 * What a live client (conversation WebSocket or Colyseus game client) sent: `{content, mode?}`
 * with mode `conversation` (default) or `analysis`, or `{type: "capability_result", callId,
 * result}`. Anything else is `invalid`, with a message saying what to send instead.
 */
export function parseClientMessage(message: unknown): ClientMessage {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    return { kind: 'invalid', message: 'Messages must be JSON objects, e.g. {"content":"Hello"}.' };
  }
  const m = message as Record<string, unknown>;
  if (m.type === 'capability_result') {
    if (typeof m.callId !== 'string') return { kind: 'invalid', message: "A capability_result needs the 'callId' of the capability event." };
    return { kind: 'capability_result', callId: m.callId, result: m.result ?? null };
  }
  if (typeof m.content !== 'string' || m.content.trim() === '') {
    return { kind: 'invalid', message: "Missing 'content': send {\"content\":\"…\",\"mode\":\"conversation\"}." };
  }
  if (m.content.length > MAX_CONTENT_CHARS) {
    return { kind: 'invalid', message: `'content' is longer than ${MAX_CONTENT_CHARS} characters.` };
  }
  const mode = m.mode ?? 'conversation';
  if (mode !== 'conversation' && mode !== 'analysis') return { kind: 'invalid', message: "'mode' must be 'conversation' or 'analysis'." };
  return { kind: 'say', content: m.content, mode };
}
