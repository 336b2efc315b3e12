import { TroupeError } from '../errors.ts';
import { checkText, decodeUtf8 } from '../input/text.ts';

/** The longest player message or analysis question accepted. */
export const MAX_CONTENT_CHARS = 32_000;

export type ClientMessage =
  | { kind: 'say'; content: string; mode: 'conversation' | 'analysis' }
  | { kind: 'capability_result'; callId: string; result: unknown }
  | { kind: 'invalid'; error: TroupeError };

/** A conversation WebSocket frame (text or binary, as bytes): strict UTF-8 JSON, then the protocol. */
export function decodeClientFrame(bytes: Uint8Array): ClientMessage {
  let text: string;
  try {
    text = decodeUtf8(bytes, 'The message');
  } catch (err) {
    return { kind: 'invalid', error: err as TroupeError };
  }
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return invalid('invalid_json', 'Messages must be JSON, e.g. {"content":"Hello"}.', null);
  }
  return parseClientMessage(message);
}

/**
 * What a live client (conversation WebSocket or Colyseus game client) sent: `{content, mode?}`
 * with mode `conversation` (default) or `analysis`, or `{type: "capability_result", callId,
 * result}`. Anything else is `invalid`, with an error saying what to send instead. The text rule
 * of every boundary (src/input/text.ts) applies to every string in it.
 */
export function parseClientMessage(message: unknown): ClientMessage {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    return invalid('invalid_request', 'Messages must be JSON objects, e.g. {"content":"Hello"}.', null);
  }
  try {
    checkText(message);
  } catch (err) {
    return { kind: 'invalid', error: err as TroupeError };
  }
  const m = message as Record<string, unknown>;
  if (m.type === 'capability_result') {
    if (typeof m.callId !== 'string') return invalid('missing_parameter', "A capability_result needs the 'callId' of the capability event.", 'callId');
    return { kind: 'capability_result', callId: m.callId, result: m.result ?? null };
  }
  if (typeof m.content !== 'string' || m.content.trim() === '') {
    return invalid('missing_parameter', "Missing 'content': send {\"content\":\"…\",\"mode\":\"conversation\"}.", 'content');
  }
  if (m.content.length > MAX_CONTENT_CHARS) {
    return invalid('invalid_parameter', `'content' is longer than ${MAX_CONTENT_CHARS} characters.`, 'content');
  }
  const mode = m.mode ?? 'conversation';
  if (mode !== 'conversation' && mode !== 'analysis') return invalid('invalid_parameter', "'mode' must be 'conversation' or 'analysis'.", 'mode');
  return { kind: 'say', content: m.content, mode };
}

function invalid(detailCode: string, message: string, param: string | null): ClientMessage {
  const code = detailCode === 'invalid_json' ? 'invalid_json' : 'invalid_request';
  return { kind: 'invalid', error: new TroupeError(code, message, { param, detailCode }) };
}
