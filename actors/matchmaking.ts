import { ErrorCode, matchMaker, ServerError } from '@colyseus/core';
import type { SeatRequest } from '../src/conversations/gateway.ts';
import { TroupeError } from '../src/errors.ts';

/**
 * A seat in the Colyseus room `roomId` for a game client, wherever the room runs: what the
 * Colyseus SDK's `joinById` and `reconnect` expect from matchmaking. The room checks the key
 * again as the client joins (`onAuth`).
 */
export async function reserveSeat(roomId: string, request: SeatRequest): Promise<Record<string, unknown>> {
  const auth = { token: request.token, headers: new Headers(), ip: undefined };
  try {
    const reservation =
      request.method === 'joinById' ? await matchMaker.joinById(roomId, request.options, auth) : await matchMaker.reconnect(roomId, request.options);
    return reservation as unknown as Record<string, unknown>;
  } catch (err) {
    throw fromMatchmaking(err);
  }
}

function fromMatchmaking(err: unknown): unknown {
  if (err instanceof TroupeError || !(err instanceof ServerError)) return err;
  switch (err.code) {
    case ErrorCode.AUTH_FAILED:
      return new TroupeError('invalid_api_key', 'The API key was not accepted for this room.');
    case ErrorCode.MATCHMAKE_INVALID_ROOM_ID:
      return new TroupeError('service_unavailable', 'The room was restarting; try again.');
    case ErrorCode.MATCHMAKE_EXPIRED:
      return new TroupeError('invalid_request', `Cannot reconnect: ${err.message}`, { param: 'reconnectionToken' });
    default:
      return new TroupeError('service_unavailable', `Matchmaking failed: ${err.message}`);
  }
}
