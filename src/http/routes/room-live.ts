import { z } from 'zod';
import { TroupeError, notFound } from '../../errors.ts';
import { RoomLineSchema } from '../../rooms/protocol.ts';
import { IdParam } from '../common-schemas.ts';
import { idempotencyKeyOf } from '../idempotency.ts';
import { roomSocket } from '../room-socket.ts';
import { defineRoute } from '../route.ts';
import { TranscriptEntrySchema } from './rooms.ts';

const tags = ['Rooms'];
const RoomParams = z.strictObject({ roomId: IdParam });

/** What is said in a room, as text: players who type, game servers, tests; and its live stream. */
export const roomLiveRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/rooms/:roomId/messages',
    auth: 'key',
    tags,
    summary: "A player's line in the room (as text); the characters answer on the room's stream",
    params: RoomParams,
    body: RoomLineSchema,
    response: { status: 202, schema: TranscriptEntrySchema, description: "The player's transcript entry; the characters' answers follow as room events" },
    errors: [404, 409],
    handler: async ({ params, body, headers, principal, resources }) => ({
      status: 202,
      body: await resources.roomActors.say(principal.projectId, params.roomId, { content: body.content, speakerName: body.speakerName ?? null }, idempotencyKeyOf(headers)),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/rooms/:roomId/ws',
    auth: 'key-or-agent',
    tags,
    summary: 'The room WebSocket (authenticate with ?token=<API key>)',
    params: RoomParams,
    query: z.strictObject({ token: z.string().optional() }),
    response: { status: 101, description: 'Switching protocols' },
    errors: [404, 426],
    handler: async () => {
      throw new TroupeError('upgrade_required', 'This endpoint is a WebSocket: connect with ws:// and ?token=<API key>.', { headers: { upgrade: 'websocket' } });
    },
    websocket: async ({ params, principal, resources }) => {
      // A voice agent's token opens its own room only: any other answers as not found.
      if (principal.agent && principal.agent.roomId !== params.roomId) throw notFound('room', params.roomId);
      const room = await resources.rooms.get(principal.projectId, params.roomId);
      return roomSocket(resources, principal.projectId, room.id, principal.agent?.characterId);
    },
  }),
];
