import { z } from 'zod';
import { isId } from '../../ids.ts';
import { defineRoute, type Route } from '../route.ts';

const tags = ['Game clients (Colyseus)'] as const;

/**
 * Colyseus matchmaking, as the Colyseus SDK calls it: `client.joinById(conversationId)` posts
 * here with the API key (`client.auth.token`) as a bearer token, and gets a seat reservation
 * for the conversation's room, on whichever process runs it. Only joining an existing
 * conversation (and reconnecting) is offered: conversations are made with POST /conversations.
 */
export const matchmakeRoutes: Route[] = [
  defineRoute({
    method: 'POST',
    path: '/matchmake/:method/:roomId',
    auth: 'key',
    tags,
    summary: "Join a conversation's or a room's Colyseus room (Colyseus SDK matchmaking)",
    params: z.strictObject({
      method: z.enum(['joinById', 'reconnect']),
      roomId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a conversation or room id'),
    }),
    body: z.record(z.string(), z.unknown()),
    response: { status: 200, description: 'A seat reservation for the Colyseus SDK' },
    errors: [404, 503],
    handler: async ({ params, body, principal, resources, headers }) => {
      const token = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? '')?.[1] ?? '';
      const request = { method: params.method, options: body, token };
      // 404 for someone else's conversation or room; joining makes its actor if none runs.
      const gateway = isId('room', params.roomId) ? resources.roomActors : resources.conversationActors;
      return { body: await gateway.reserveSeat(principal.projectId, params.roomId, request) };
    },
  }),
];
