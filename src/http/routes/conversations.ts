import { z } from 'zod';
import { MessageContent } from '../../conversations/protocol.ts';
import { TroupeError } from '../../errors.ts';
import { IdParam } from '../common-schemas.ts';
import { conversationSocket } from '../conversation-socket.ts';
import { idempotencyKeyOf } from '../idempotency.ts';
import { defineRoute } from '../route.ts';

const tags = ['Conversations'];
const ConversationParams = z.strictObject({ conversationId: IdParam });

const MessageSchema = z
  .object({
    id: z.string(),
    conversationId: z.string(),
    role: z.enum(['player', 'character']),
    content: z.string(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'Message' });

const ConversationSchema = z.object({ id: z.string(), createdAt: z.iso.datetime(), characterId: z.string() }).meta({ id: 'Conversation' });

const CapabilityCallSchema = z.object({
  callId: z.string(),
  name: z.string(),
  type: z.string(),
  params: z.record(z.string(), z.unknown()),
  result: z.unknown().optional(),
});

const CitationSchema = z
  .object({ documentId: z.string(), chunkId: z.string(), score: z.number(), excerpt: z.string() })
  .meta({ id: 'Citation', description: 'A document chunk the reply was given' });

export const conversationRoutes = [
  defineRoute({
    method: 'POST',
    path: '/conversations',
    auth: 'key',
    tags,
    summary: 'Start a conversation with a character',
    body: z.strictObject({ characterId: z.string().min(1).max(200) }),
    response: { status: 201, schema: ConversationSchema, description: 'The conversation' },
    handler: async ({ body, principal, resources }) => ({ body: await resources.conversations.create(principal.projectId, body.characterId) }),
  }),
  defineRoute({
    method: 'GET',
    path: '/conversations/:conversationId',
    auth: 'key',
    tags,
    summary: 'A conversation with its full history, in order',
    params: ConversationParams,
    response: { status: 200, schema: ConversationSchema.extend({ messages: z.array(MessageSchema) }), description: 'The conversation' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.conversations.getWithMessages(principal.projectId, params.conversationId),
    }),
  }),
  defineRoute({
    method: 'POST',
    path: '/conversations/:conversationId/messages',
    auth: 'key',
    tags,
    summary: "Send the player's message and get the character's reply (both stored; open sockets see the stream)",
    params: ConversationParams,
    body: z.strictObject({ content: MessageContent }),
    response: {
      status: 200,
      schema: z.object({
        playerMessage: MessageSchema,
        characterMessage: MessageSchema,
        capabilityCalls: z.array(CapabilityCallSchema),
        citations: z.array(CitationSchema),
      }),
      description: 'Both messages, and the capabilities the character called',
    },
    errors: [404, 409, 502],
    handler: async ({ params, body, headers, principal, resources }) => ({
      // Not tied to this request's signal: the reply is finished and stored even if the caller leaves.
      body: await resources.conversationActors.exchange(principal.projectId, params.conversationId, body.content, 'http', idempotencyKeyOf(headers)),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/conversations/:conversationId/ws',
    auth: 'key',
    tags,
    summary: 'The conversation WebSocket (authenticate with ?token=<API key>)',
    params: ConversationParams,
    query: z.strictObject({ token: z.string().optional() }),
    response: { status: 101, description: 'Switching protocols' },
    errors: [404, 426],
    handler: async () => {
      throw new TroupeError('upgrade_required', 'This endpoint is a WebSocket: connect with ws:// and ?token=<API key>.', {
        headers: { upgrade: 'websocket' },
      });
    },
    websocket: async ({ params, principal, resources }) => {
      const conversation = await resources.conversations.get(principal.projectId, params.conversationId);
      return conversationSocket(resources, principal.projectId, conversation.id, conversation.characterId);
    },
  }),
];
