import { decodeClientFrame } from '../conversations/client-message.ts';
import type { ConversationEvent } from '../conversations/events.ts';
import { TroupeError, toErrorEvent } from '../errors.ts';
import type { Resources } from '../resources.ts';
import type { WebSocketHandler, WebSocketSession } from './types.ts';

/**
 * The conversation WebSocket protocol: `ready` on connect; the client sends
 * `{content, mode?}` (mode `conversation` or `analysis`) or `{type: "capability_result",
 * callId, result}`; the server streams `chunk`, `capability` and `error` events. Bad input
 * gets an `error` event and the socket stays open. The conversation's actor may run in another
 * process: events arrive through its presence channel, messages go to it as calls.
 */
/** RFC 6455's "try again later". */
const WS_TRY_AGAIN_LATER = 1013;

export function conversationSocket(resources: Resources, projectId: string, conversationId: string, characterId: string): WebSocketHandler {
  const { conversationActors: actors, logger } = resources;
  let unsubscribe: (() => void) | null = null;
  let closed = false;

  const send = (session: WebSocketSession, event: ConversationEvent) => {
    // A client too slow to take its stream would get a reply with holes; close it instead.
    if (!session.send(JSON.stringify(event))) session.close(WS_TRY_AGAIN_LATER, 'client too slow to receive the stream');
  };
  const fail = (session: WebSocketSession, err: unknown, fallback?: string) => send(session, toErrorEvent(err, fallback));

  return {
    onOpen(session) {
      // `ready` means subscribed: every event published after it reaches this socket.
      // Events from an actor on another process come through Redis: when that link is lost the
      // client is told and closed (1013, try again later), never left with holes in a reply.
      const onLost = () => {
        fail(session, new TroupeError('redis_unavailable', "Lost the link to the conversation's actor on another process; reconnect."));
        session.close(WS_TRY_AGAIN_LATER, 'conversation events interrupted');
      };
      actors.subscribe(conversationId, (event) => send(session, event), onLost).then(
        (stop) => {
          if (closed) return stop();
          unsubscribe = stop;
          send(session, { type: 'ready' });
        },
        (err: unknown) => {
          logger.error({ err, conversationId }, 'conversation socket could not subscribe');
          session.close(1011, 'could not subscribe to the conversation');
        },
      );
    },
    onMessage(session, data) {
      const parsed = decodeClientFrame(data);
      if (parsed.kind === 'invalid') {
        fail(session, parsed.error);
      } else if (parsed.kind === 'capability_result') {
        actors.capabilityResult(conversationId, parsed.callId, parsed.result).then(
          (answered) => {
            if (!answered) fail(session, new TroupeError('invalid_request', `No capability call is waiting for callId ${JSON.stringify(parsed.callId)}.`, { param: 'callId', detailCode: 'unknown_call' }));
          },
          (err: unknown) => fail(session, err),
        );
      } else if (parsed.mode === 'conversation') {
        // Replies run to the end even if this socket leaves: others may listen, and the history
        // must hold the reply. A failure once the reply began reached every listener from the
        // actor (`reported`); any other failure is this sender's alone, and it is told.
        actors.send(projectId, conversationId, parsed.content, 'socket').catch((err: unknown) => {
          if (err instanceof TroupeError && err.reported) return;
          if (!(err instanceof TroupeError) || err.status >= 500) logger.error({ err, conversationId }, 'conversation message failed');
          fail(session, err);
        });
      } else {
        const chunk = (content: string, done: boolean) => send(session, { type: 'chunk', characterId, content, done });
        actors.analyse(projectId, conversationId, parsed.content, (delta) => chunk(delta, false)).then(
          () => chunk('', true),
          (err: unknown) => {
            if (!(err instanceof TroupeError)) logger.error({ err, conversationId }, 'conversation analysis failed');
            fail(session, err, 'The analysis failed.');
          },
        );
      }
    },
    onClose() {
      closed = true;
      unsubscribe?.();
    },
  };
}
