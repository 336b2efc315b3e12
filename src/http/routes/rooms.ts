import { z } from 'zod';
import { ROOM_MODES, SPEAKER_TYPES } from '../../db/room-schema.ts';
import { CreateRoomSchema } from '../../rooms/service.ts';
import { IdParam } from '../common-schemas.ts';
import { PageQuerySchema, nextLink, toPage } from '../pagination.ts';
import { defineRoute } from '../route.ts';

const tags = ['Rooms'];
const RoomParams = z.strictObject({ roomId: IdParam });

const ParticipantSchema = z
  .object({
    id: z.string(),
    createdAt: z.iso.datetime(),
    roomId: z.string(),
    characterId: z.string(),
    conversationId: z.string().describe("The participant's own conversation: its memory of the room"),
    rtcIdentity: z.string().describe("Identity in the WebRTC session: 'agent-' + characterId"),
    leftAt: z.iso.datetime().nullable().describe('Null while the participant is in the room'),
  })
  .meta({ id: 'Participant' });

const RoomSchema = z
  .object({
    id: z.string(),
    createdAt: z.iso.datetime(),
    projectId: z.string(),
    name: z.string(),
    mode: z.enum(ROOM_MODES),
    scenePrompt: z.string().nullable(),
    endedAt: z.iso.datetime().nullable().describe('Time the room ended; null while active'),
    participants: z.array(ParticipantSchema),
  })
  .meta({ id: 'Room' });

export const TranscriptEntrySchema = z
  .object({
    id: z.string(),
    createdAt: z.iso.datetime(),
    roomId: z.string(),
    speakerType: z.enum(SPEAKER_TYPES),
    characterId: z.string().nullable().describe('Null for user messages'),
    speakerName: z.string().nullable().describe("The speaker's name when it was said (an addition to the interface)"),
    content: z.string(),
  })
  .meta({ id: 'TranscriptEntry' });

export const roomRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/rooms',
    auth: 'key',
    tags,
    summary: 'Create a voice room',
    body: CreateRoomSchema,
    response: { status: 201, schema: RoomSchema, description: 'The room, without participants' },
    handler: async ({ body, principal, resources }) => ({ body: await resources.rooms.create(principal.projectId, body) }),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/rooms',
    auth: 'key',
    tags,
    summary: 'List active rooms (not ended) in creation order, with the participants in them',
    query: PageQuerySchema,
    response: { status: 200, schema: z.array(RoomSchema), description: 'Active rooms of the project' },
    handler: async ({ query, principal, resources, path }) => {
      const page = toPage(query);
      const items = await resources.rooms.list(principal.projectId, page);
      return { body: items, headers: nextLink(path, page, items) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/rooms/:roomId',
    auth: 'key',
    tags,
    summary: 'Retrieve a room with every participant it had (those that left carry leftAt)',
    params: RoomParams,
    response: { status: 200, schema: RoomSchema, description: 'The room' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({ body: await resources.rooms.get(principal.projectId, params.roomId) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/rooms/:roomId/participants',
    auth: 'key',
    tags,
    summary: 'Add a character to the room (409 when it is already in it or the room has ended)',
    params: RoomParams,
    body: z.strictObject({ characterId: IdParam }),
    response: { status: 201, schema: ParticipantSchema, description: 'The new participant' },
    errors: [404, 409],
    handler: async ({ params, body, principal, resources }) => ({
      body: await resources.rooms.addParticipant(principal.projectId, params.roomId, body.characterId),
    }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/rooms/:roomId/participants/:characterId',
    auth: 'key',
    tags,
    summary: 'Remove a character from the room',
    params: z.strictObject({ roomId: IdParam, characterId: IdParam }),
    response: { status: 200, schema: ParticipantSchema, description: 'The participant, with leftAt set' },
    errors: [404, 409],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.rooms.removeParticipant(principal.projectId, params.roomId, params.characterId),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/rooms/:roomId/transcript',
    auth: 'key',
    tags,
    summary: 'Everything said in the room, in the order it was said',
    params: RoomParams,
    response: { status: 200, schema: z.array(TranscriptEntrySchema), description: 'The transcript' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({ body: await resources.rooms.transcript(principal.projectId, params.roomId) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/rooms/:roomId/end',
    auth: 'key',
    tags,
    summary: 'End the room: participants leave and it takes no more (ending twice answers 409)',
    params: RoomParams,
    response: { status: 200, schema: RoomSchema, description: 'The room with endedAt set' },
    errors: [404, 409],
    handler: async ({ params, principal, resources }) => ({ body: await resources.rooms.end(principal.projectId, params.roomId) }),
  }),
];
