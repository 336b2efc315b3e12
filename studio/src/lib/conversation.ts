import type { Citation, Message } from './types.ts';

/** One line of the Playground's log, built from history and the conversation WebSocket's events. */
export type LogItem =
  | { kind: 'player'; key: string; text: string; analysis: boolean }
  | { kind: 'character'; key: string; replyId: string | null; text: string; done: boolean; analysis: boolean; citations: Citation[] }
  | { kind: 'capability'; key: string; callId: string; name: string; params: unknown; answered: string | null }
  | { kind: 'error'; key: string; message: string; code: string | null };

export function fromHistory(messages: Message[]): LogItem[] {
  return messages.map((m) =>
    m.role === 'player'
      ? { kind: 'player', key: m.id, text: m.content, analysis: false }
      : { kind: 'character', key: m.id, replyId: null, text: m.content, done: true, analysis: false, citations: [] },
  );
}

type ServerEvent =
  | { type: 'ready' }
  | { type: 'chunk'; content: string; done: boolean; replyId: string }
  | { type: 'capability'; name: string; params: unknown; callId: string; replyId: string }
  | { type: 'citations'; citations: Citation[]; replyId?: string }
  | { type: 'error'; message: string; code?: string; replyId?: string };

/**
 * Folds one server event into the log. `nextMode` says whether a reply that starts now answers
 * an analysis question (the socket handles one message at a time, in order).
 */
export function applyEvent(log: LogItem[], raw: unknown, nextMode: () => boolean): LogItem[] {
  const event = raw as ServerEvent;
  switch (event.type) {
    case 'chunk': {
      const index = log.findIndex((i) => i.kind === 'character' && i.replyId === event.replyId);
      if (index === -1) {
        const item: LogItem = { kind: 'character', key: event.replyId, replyId: event.replyId, text: event.content, done: event.done, analysis: nextMode(), citations: [] };
        return [...log, item];
      }
      return log.map((i, n) => (n === index && i.kind === 'character' ? { ...i, text: i.text + event.content, done: event.done } : i));
    }
    case 'capability':
      return [...log, { kind: 'capability', key: event.callId, callId: event.callId, name: event.name, params: event.params, answered: null }];
    case 'citations': {
      const index = log.findLastIndex((i) => i.kind === 'character' && (event.replyId === undefined || i.replyId === event.replyId));
      return log.map((i, n) => (n === index && i.kind === 'character' ? { ...i, citations: event.citations } : i));
    }
    case 'error':
      return [...log, { kind: 'error', key: `error-${log.length}`, message: event.message, code: event.code ?? null }];
    default:
      return log;
  }
}
