/**
 * What a conversation tells its listeners, as the conversation WebSocket defines it (plus the
 * extras noted). Colyseus game clients receive the same events as room messages of that type.
 */
import type { ErrorEvent } from '../errors.ts';
import type { Citation } from '../retrieval/knowledge.ts';

export type ConversationEvent =
  | { type: 'ready' }
  /** `replyId` is an addition: every event of one reply carries it (analysis chunks have none). */
  | { type: 'chunk'; characterId: string; content: string; done: boolean; replyId?: string }
  /** `callId` is an addition: a client_function_call's result is sent back with it. */
  | { type: 'capability'; characterId: string; name: string; params: Record<string, unknown>; callId: string; replyId: string }
  /** `code` and `param` are additions, as in the REST error body; `replyId` names the reply it ends. */
  | (ErrorEvent & { replyId?: string })
  /** An addition: after a reply's last chunk, the document chunks it was given (when any). */
  | { type: 'citations'; characterId: string; citations: Citation[]; replyId: string };
