import { z } from 'zod';
import { TroupeError } from '../../errors.ts';
import { JoinTokenRequestSchema } from '../../rooms/voice-control.ts';
import { IdParam } from '../common-schemas.ts';
import { defineRoute } from '../route.ts';

const tags = ['Rooms'];
const RoomParams = z.strictObject({ roomId: IdParam });

/** LiveKit's webhooks carry a room and a participant at most; far below this. */
const MAX_WEBHOOK_BYTES = 256 * 1024;

const JoinTokenSchema = z
  .object({
    token: z.string().describe('LiveKit join token (JWT): join this room, publish microphone audio, subscribe, publish data'),
    url: z.string().describe('The LiveKit server to connect to (LIVEKIT_URL, ws:// or wss://)'),
  })
  .meta({ id: 'RoomJoinToken' });

export const roomVoiceRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/rooms/:roomId/token',
    auth: 'key',
    tags,
    summary: "A player's WebRTC join token for the room's voice session (lifetime ROOM_TOKEN_TTL_S)",
    params: RoomParams,
    query: JoinTokenRequestSchema,
    response: { status: 200, schema: JoinTokenSchema, description: 'The token and the LiveKit URL' },
    errors: [404, 409, 503],
    handler: async ({ params, query, principal, resources }) => ({
      body: await resources.roomVoice.token(principal.projectId, params.roomId, query),
    }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/rooms/:roomId/start',
    auth: 'key',
    tags,
    summary: "Start the room's voice agents, one per participant (idempotent; 400 without participants)",
    params: RoomParams,
    response: { status: 200, schema: z.object({ started: z.literal(true) }), description: 'The room runs' },
    errors: [404, 409, 502, 503],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.roomVoice.start(principal.projectId, params.roomId),
    }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/livekit/webhook',
    // LiveKit signs its webhooks with the API key and secret instead of sending a Troupe key.
    auth: 'none',
    tags,
    summary: "LiveKit's webhook (point LiveKit at it): room_finished ends the room; humans joining or leaving are reported",
    rawRequest: { contentType: 'application/webhook+json', schema: { type: 'object', description: 'A LiveKit WebhookEvent, signed in Authorization' } },
    response: { status: 200, schema: z.object({ received: z.literal(true) }), description: 'Handled, or ignored (unknown room)' },
    errors: [401, 413, 503],
    handler: async ({ headers, rawBody, resources }) => {
      // The signature covers the exact bytes, so the body is read raw, never re-serialized.
      const body = await readText(headers, rawBody, MAX_WEBHOOK_BYTES);
      await resources.roomVoice.receiveWebhook(body, headers.authorization);
      return { body: { received: true } };
    },
  }),
];

async function readText(headers: Readonly<Record<string, string>>, body: AsyncIterable<Uint8Array>, limit: number): Promise<string> {
  const tooLarge = () => new TroupeError('payload_too_large', `The request body is larger than the ${limit}-byte limit.`);
  if (Number(headers['content-length']) > limit) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
