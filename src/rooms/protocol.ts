import type { Logger } from 'pino';
import { z } from 'zod';
import type { ConversationEvent } from '../conversations/events.ts';
import { IdempotencyKey, MessageContent, parseLiveMessage } from '../conversations/protocol.ts';
import { TroupeError, toErrorEvent } from '../errors.ts';
import { decodeUtf8 } from '../input/text.ts';
import { parseInput } from '../input/validation.ts';
import type { RoomEvent } from './events.ts';
import type { RoomGateway, SpokenReport } from './gateway.ts';

/** A player's line in a room, on every surface: the REST body, the room WebSocket, Colyseus. */
export const RoomLineSchema = z.strictObject({
  content: MessageContent,
  speakerName: z.string().trim().min(1, 'must not be empty').max(100).nullable().optional(),
});

const LineMessage = RoomLineSchema.extend({ type: z.literal('message').optional(), idempotencyKey: IdempotencyKey.optional() });

/** A voice agent's report on a line it played (`SpokenReport`); only agents may send it. */
const SpokenMessage = z.strictObject({
  type: z.literal('spoken'),
  replyId: z.string().min(1).max(100),
  text: z.string().max(100_000),
  interrupted: z.boolean(),
});

export type RoomClientMessage =
  | { kind: 'say'; content: string; speakerName: string | null; idempotencyKey?: string }
  | { kind: 'capability_result'; callId: string; result: unknown }
  | { kind: 'spoken'; report: Omit<SpokenReport, 'characterId'> }
  | { kind: 'invalid'; error: TroupeError };

/** A room WebSocket frame (as bytes): strict UTF-8 JSON, then the protocol. */
export function decodeRoomFrame(bytes: Uint8Array): RoomClientMessage {
  try {
    return parseRoomClientMessage(JSON.parse(decodeUtf8(bytes, 'The message')) as unknown);
  } catch (err) {
    if (err instanceof TroupeError) return { kind: 'invalid', error: err };
    return { kind: 'invalid', error: new TroupeError('invalid_json', 'Messages must be JSON, e.g. {"content":"Hello"}.', { detailCode: 'invalid_json' }) };
  }
}

/** `{content, speakerName?}` or `{type: "capability_result", callId, result}`; anything else is `invalid`. */
export function parseRoomClientMessage(message: unknown): RoomClientMessage {
  return parseLiveMessage(message, (m): RoomClientMessage => {
    if ((m as { type?: unknown }).type === 'spoken') {
      const { replyId, text, interrupted } = parseInput(SpokenMessage, m, null);
      return { kind: 'spoken', report: { replyId, text, interrupted } };
    }
    const { content, speakerName, idempotencyKey } = parseInput(LineMessage, m, null);
    return { kind: 'say', content, speakerName: speakerName ?? null, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) };
  });
}

/** One live client of a room: where its own answers go. */
export interface RoomClient {
  projectId: string;
  roomId: string;
  /** Set for a character's voice agent (authenticated with an agent token). */
  agentOf?: string;
  send(event: RoomEvent | ConversationEvent): void;
}

/**
 * The room's live-client protocol, once for the room WebSocket and Colyseus clients: lines go
 * to the room through the gateway (everyone hears them as `transcript` events); what concerns
 * this client alone (bad input, a line that could not be taken) comes back as `error`.
 */
export function handleRoomClientMessage(gateway: RoomGateway, logger: Logger, client: RoomClient, message: RoomClientMessage): void {
  const fail = (err: unknown) => client.send(toErrorEvent(err));
  if (message.kind === 'invalid') {
    fail(message.error);
  } else if (message.kind === 'capability_result') {
    gateway.capabilityResult(client.roomId, message.callId, message.result).then(
      (answered) => {
        if (!answered) fail(new TroupeError('invalid_request', `No capability call is waiting for callId ${JSON.stringify(message.callId)}.`, { param: 'callId', detailCode: 'unknown_call' }));
      },
      (err: unknown) => fail(err),
    );
  } else if (message.kind === 'spoken') {
    if (client.agentOf === undefined) {
      fail(new TroupeError('invalid_request', "Only a character's voice agent reports spoken lines.", { param: 'type', detailCode: 'agents_only' }));
      return;
    }
    // A report the room no longer waits for (late, or for a line it gave up on) changes nothing.
    gateway.spoken(client.roomId, { ...message.report, characterId: client.agentOf }).catch((err: unknown) => logger.warn({ err, roomId: client.roomId }, 'spoken report not delivered'));
  } else {
    gateway.say(client.projectId, client.roomId, { content: message.content, speakerName: message.speakerName }, message.idempotencyKey).catch((err: unknown) => {
      if (!(err instanceof TroupeError) || err.status >= 500) logger.error({ err, roomId: client.roomId }, 'room message failed');
      fail(err);
    });
  }
}
