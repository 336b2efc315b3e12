import type { ConversationEvent } from '../conversations/hub.ts';
import { TroupeError } from '../errors.ts';
import type { Resources } from '../resources.ts';
import type { WebSocketHandler, WebSocketSession } from './types.ts';

const MAX_CONTENT_CHARS = 32_000;

/**
 * The conversation WebSocket protocol: `ready` on connect; the client sends
 * `{content, mode?}` (mode `conversation` or `analysis`) or `{type: "capability_result",
 * callId, result}`; the server streams `chunk`, `capability` and `error` events. Bad input
 * gets an `error` event and the socket stays open.
 */
export function conversationSocket(resources: Resources, projectId: string, conversationId: string, characterId: string): WebSocketHandler {
  const { conversations, hub, logger } = resources;
  let unsubscribe: (() => void) | null = null;
  // Replies started here run to the end even if this socket leaves: others may listen, and the
  // history must hold the reply. Only shutting the process down stops them.
  const signal = new AbortController().signal;

  const send = (session: WebSocketSession, event: ConversationEvent) => {
    // A client too slow to take its stream would get a reply with holes; close it instead.
    if (!session.send(JSON.stringify(event))) session.close(1013, 'client too slow to receive the stream');
  };
  const fail = (session: WebSocketSession, message: string) => send(session, { type: 'error', message });

  return {
    onOpen(session) {
      unsubscribe = hub.subscribe(conversationId, (event) => send(session, event));
      send(session, { type: 'ready' });
    },
    onMessage(session, data) {
      let message: unknown;
      try {
        message = JSON.parse(data);
      } catch {
        fail(session, 'Messages must be JSON, e.g. {"content":"Hello"}.');
        return;
      }
      if (typeof message !== 'object' || message === null || Array.isArray(message)) {
        fail(session, 'Messages must be JSON objects, e.g. {"content":"Hello"}.');
        return;
      }
      const m = message as Record<string, unknown>;
      if (m.type === 'capability_result') {
        if (typeof m.callId !== 'string' || !hub.resolveResult(conversationId, m.callId, m.result ?? null)) {
          fail(session, `No capability call is waiting for callId ${JSON.stringify(m.callId)}.`);
        }
        return;
      }
      if (typeof m.content !== 'string' || m.content.trim() === '') {
        fail(session, "Missing 'content': send {\"content\":\"…\",\"mode\":\"conversation\"}.");
        return;
      }
      if (m.content.length > MAX_CONTENT_CHARS) {
        fail(session, `'content' is longer than ${MAX_CONTENT_CHARS} characters.`);
        return;
      }
      const mode = m.mode ?? 'conversation';
      if (mode === 'conversation') {
        conversations.send(projectId, conversationId, m.content, { kind: 'websocket' }, signal).catch((err: unknown) => {
          // The service already told every socket; only unexpected failures need a log line.
          if (!(err instanceof TroupeError)) logger.error({ err, conversationId }, 'conversation reply failed');
        });
      } else if (mode === 'analysis') {
        const chunk = (content: string, done: boolean) => send(session, { type: 'chunk', characterId, content, done });
        conversations.analyse(projectId, conversationId, m.content, (delta) => chunk(delta, false), signal).then(
          () => chunk('', true),
          (err: unknown) => {
            if (!(err instanceof TroupeError)) logger.error({ err, conversationId }, 'conversation analysis failed');
            fail(session, err instanceof TroupeError ? err.message : 'The analysis failed.');
          },
        );
      } else {
        fail(session, "'mode' must be 'conversation' or 'analysis'.");
      }
    },
    onClose() {
      unsubscribe?.();
    },
  };
}
