import type { ConversationEvent } from '../conversations/events.ts';
import { decodeClientFrame, handleClientMessage } from '../conversations/protocol.ts';
import type { Resources } from '../resources.ts';
import { liveSocket } from './live-socket.ts';
import type { WebSocketHandler } from './types.ts';

/**
 * The conversation WebSocket: the conversation's events; what the client sends goes through
 * the one live-client protocol (src/conversations/protocol.ts). Bad input gets an `error`
 * event and the socket stays open. The actor may run in another process.
 */
export function conversationSocket(resources: Resources, projectId: string, conversationId: string, characterId: string): WebSocketHandler {
  const { conversationActors: gateway, logger } = resources;
  return liveSocket<ConversationEvent>({
    logger,
    what: 'conversation',
    subscribe: (listener, onLost) => gateway.subscribe(conversationId, listener, onLost),
    onFrame: (data, reply) => handleClientMessage(gateway, logger, { projectId, conversationId, characterId, send: reply }, decodeClientFrame(data)),
  });
}
