import { ErrorCode, matchMaker, ServerError } from '@colyseus/core';
import { z } from 'zod';
import { TroupeError } from '../../errors.ts';
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
    summary: "Join a conversation's Colyseus room (Colyseus SDK matchmaking)",
    params: z.strictObject({
      method: z.enum(['joinById', 'reconnect']),
      roomId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a conversation id'),
    }),
    body: z.record(z.string(), z.unknown()),
    response: { status: 200, description: 'A seat reservation for the Colyseus SDK' },
    errors: [404, 503],
    handler: async ({ params, body, principal, resources, headers }) => {
      const { conversationActors } = resources;
      // 404 for someone else's conversation; joining makes its actor if none runs.
      await conversationActors.open(principal.projectId, params.roomId);
      const token = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? '')?.[1] ?? '';
      const auth = { token, headers: new Headers(), ip: undefined };
      try {
        const reservation =
          params.method === 'joinById'
            ? await matchMaker.joinById(params.roomId, body, auth)
            : await matchMaker.reconnect(params.roomId, body);
        return { body: reservation };
      } catch (err) {
        throw fromMatchmaking(err);
      }
    },
  }),
];

function fromMatchmaking(err: unknown): unknown {
  if (err instanceof TroupeError || !(err instanceof ServerError)) return err;
  switch (err.code) {
    case ErrorCode.AUTH_FAILED:
      return new TroupeError('invalid_api_key', 'The API key was not accepted for this room.');
    case ErrorCode.MATCHMAKE_INVALID_ROOM_ID:
      return new TroupeError('service_unavailable', 'The conversation was restarting; try again.');
    case ErrorCode.MATCHMAKE_EXPIRED:
      return new TroupeError('invalid_request', `Cannot reconnect: ${err.message}`, { param: 'reconnectionToken' });
    default:
      return new TroupeError('service_unavailable', `Matchmaking failed: ${err.message}`);
  }
}
