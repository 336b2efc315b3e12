import type { Logger } from 'pino';
import { z } from 'zod';
import { TroupeError, toErrorEvent } from '../errors.ts';
import { checkText, decodeUtf8 } from '../input/text.ts';
import { parseInput } from '../input/validation.ts';
import type { ConversationEvent } from './events.ts';
import type { ConversationGateway } from './gateway.ts';

/** The longest player message or analysis question accepted. */
const MAX_CONTENT_CHARS = 32_000;

/** What a player says, on every surface: HTTP bodies, WebSocket and Colyseus messages, rooms. */
export const MessageContent = z.string().trim().min(1, 'must not be empty').max(MAX_CONTENT_CHARS);

/**
 * A client's name for one message (the `Idempotency-Key` header over HTTP, `idempotencyKey` on live
 * sockets): a retry with the same key is stored once and answered with the same reply.
 */
export const IdempotencyKey = z.string().regex(/^[\x21-\x7e]{1,255}$/, 'must be 1 to 255 visible ASCII characters');

const SayMessage = z.object({
  content: MessageContent,
  mode: z.enum(['conversation', 'analysis']).default('conversation'),
  idempotencyKey: IdempotencyKey.optional(),
});
const CapabilityResultMessage = z.object({ type: z.literal('capability_result'), callId: z.string(), result: z.unknown() });

export type ClientMessage =
  | { kind: 'say'; content: string; mode: 'conversation' | 'analysis'; idempotencyKey?: string }
  | { kind: 'capability_result'; callId: string; result: unknown }
  | { kind: 'invalid'; error: TroupeError };

/** A WebSocket frame (text or binary, as bytes): strict UTF-8 JSON, then the protocol. */
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
    return { kind: 'invalid', error: new TroupeError('invalid_json', 'Messages must be JSON, e.g. {"content":"Hello"}.', { detailCode: 'invalid_json' }) };
  }
  return parseClientMessage(message);
}

/**
 * What a live client (conversation WebSocket or Colyseus game client) sent: `{content, mode?, idempotencyKey?}`
 * with mode `conversation` (default) or `analysis`, or `{type: "capability_result", callId,
 * result}`. Anything else is `invalid`, with an error naming the field. The text rule of every
 * boundary (src/input/text.ts) applies to every string in it.
 */
export function parseClientMessage(message: unknown): ClientMessage {
  return parseLiveMessage(message, (m) => {
    const { content, mode, idempotencyKey } = parseInput(SayMessage, m, null);
    return { kind: 'say', content, mode, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) };
  });
}

/**
 * A live client's message, on any actor's protocol: an object, under the text rule, either a
 * `capability_result` or whatever `say` makes of it (throwing a TroupeError when it is invalid).
 */
export function parseLiveMessage<S>(message: unknown, say: (message: object) => S): S | { kind: 'capability_result'; callId: string; result: unknown } | { kind: 'invalid'; error: TroupeError } {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    return { kind: 'invalid', error: new TroupeError('invalid_request', 'Messages must be JSON objects, e.g. {"content":"Hello"}.') };
  }
  try {
    checkText(message);
    if ((message as { type?: unknown }).type === 'capability_result') {
      const { callId, result } = parseInput(CapabilityResultMessage, message, null);
      return { kind: 'capability_result', callId, result: result ?? null };
    }
    return say(message);
  } catch (err) {
    return { kind: 'invalid', error: err as TroupeError };
  }
}

/** One live client of one conversation: where its own answers (errors, analysis) go. */
export interface LiveClient {
  projectId: string;
  conversationId: string;
  characterId: string;
  send(event: ConversationEvent): void;
}

/**
 * The live-client protocol, once for every surface (the conversation WebSocket, Colyseus game
 * clients): what a client sent, through the gateway, with failures answered as `error` events.
 * Replies stream to every listener from the conversation's actor; only what concerns this
 * client alone (bad input, a message that could not be handled, analysis) is sent here.
 */
export function handleClientMessage(gateway: ConversationGateway, logger: Logger, client: LiveClient, message: ClientMessage): void {
  const { projectId, conversationId, characterId } = client;
  const fail = (err: unknown, fallback?: string) => client.send(toErrorEvent(err, fallback));
  if (message.kind === 'invalid') {
    fail(message.error);
  } else if (message.kind === 'capability_result') {
    gateway.capabilityResult(conversationId, message.callId, message.result).then(
      (answered) => {
        if (!answered) fail(new TroupeError('invalid_request', `No capability call is waiting for callId ${JSON.stringify(message.callId)}.`, { param: 'callId', detailCode: 'unknown_call' }));
      },
      (err: unknown) => fail(err),
    );
  } else if (message.mode === 'conversation') {
    // Replies run to the end even if the client leaves: others may listen, and the history
    // must hold the reply. A failure once the reply began reached every listener from the
    // actor (`reported`); any other failure is this client's alone, and it is told.
    gateway.exchange(projectId, conversationId, message.content, 'live', message.idempotencyKey).catch((err: unknown) => {
      if (err instanceof TroupeError && err.reported) return;
      if (!(err instanceof TroupeError) || err.status >= 500) logger.error({ err, conversationId }, 'conversation message failed');
      fail(err);
    });
  } else {
    const chunk = (content: string, done: boolean) => client.send({ type: 'chunk', characterId, content, done });
    gateway.analyse(projectId, conversationId, message.content, (delta) => chunk(delta, false)).then(
      () => chunk('', true),
      (err: unknown) => {
        if (!(err instanceof TroupeError)) logger.error({ err, conversationId }, 'conversation analysis failed');
        fail(err, 'The analysis failed.');
      },
    );
  }
}
