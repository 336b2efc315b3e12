import type { Logger } from 'pino';
import { TroupeError, toErrorEvent } from '../errors.ts';
import { CloseCode } from './close-codes.ts';
import type { WebSocketHandler, WebSocketSession } from './types.ts';

type Event = { type: string };

export interface LiveSocketOptions<E extends Event> {
  logger: Logger;
  /** What the socket streams, e.g. "conversation" (for logs and close reasons). */
  what: string;
  /** Resolves once subscribed to the actor's events; `onLost` when delivery can no longer be complete. */
  subscribe(listener: (event: E) => void, onLost: () => void): Promise<() => void>;
  /** A frame the client sent; `reply` answers this client alone. */
  onFrame(data: Uint8Array, reply: (event: E | ReturnType<typeof toErrorEvent>) => void): void;
}

/**
 * A WebSocket that streams one actor's events (a conversation's, a room's): `ready` once
 * subscribed, then every event published after it. A client too slow to take the stream, or
 * one whose events come from another process when the link to it is lost, is told and closed
 * (try again later) rather than left with holes in what it hears.
 */
export function liveSocket<E extends Event>(options: LiveSocketOptions<E>): WebSocketHandler {
  const { logger, what } = options;
  let unsubscribe: (() => void) | null = null;
  let closed = false;
  const send = (session: WebSocketSession, event: Event) => {
    if (!session.send(JSON.stringify(event))) session.close(CloseCode.tryAgainLater, 'client too slow to receive the stream');
  };
  return {
    onOpen(session) {
      const onLost = () => {
        send(session, toErrorEvent(new TroupeError('redis_unavailable', `Lost the link to the ${what}'s actor on another process; reconnect.`)));
        session.close(CloseCode.tryAgainLater, `${what} events interrupted`);
      };
      // Events can arrive once the subscription is live but before it resolves: they wait, so
      // `ready` is always the first thing a client hears and nothing after it is missed.
      let early: Event[] | null = [];
      const deliver = (event: Event) => {
        if (early) early.push(event);
        else send(session, event);
      };
      options.subscribe(deliver, onLost).then(
        (stop) => {
          if (closed) return stop();
          unsubscribe = stop;
          send(session, { type: 'ready' });
          const waiting = early ?? [];
          early = null;
          for (const event of waiting) send(session, event);
        },
        (err: unknown) => {
          logger.error({ err, what }, 'socket could not subscribe');
          session.close(CloseCode.internalError, `could not subscribe to the ${what}`);
        },
      );
    },
    onMessage(session, data) {
      options.onFrame(data, (event) => send(session, event));
    },
    onClose() {
      closed = true;
      unsubscribe?.();
    },
  };
}
