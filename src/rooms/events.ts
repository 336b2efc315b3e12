import type { ErrorEvent } from '../errors.ts';
import type { TranscriptEntry } from './repository.ts';

/**
 * What a room tells its listeners (the room WebSocket, Colyseus game clients, voice agents).
 * Every event of one character's line carries that line's `replyId`.
 */
export type RoomEvent =
  | { type: 'ready' }
  /** Each stored entry, in spoken order. */
  | { type: 'transcript'; entry: TranscriptEntry }
  /** The speaking character's text as it streams; `done` ends the line. */
  | { type: 'chunk'; characterId: string; content: string; done: boolean; replyId: string }
  /** Who holds the floor: a character while it speaks, null when the floor is the humans'. */
  | { type: 'speaker'; characterId: string | null }
  /** A client capability call; a client_function_call is answered with `capability_result` and its `callId`. */
  | { type: 'capability'; characterId: string; name: string; params: Record<string, unknown>; callId: string; replyId: string }
  /** Someone joined or left: a character participant, or a human in the voice session. */
  | { type: 'participant'; change: 'joined' | 'left'; kind: 'character' | 'human'; characterId: string | null; identity: string; name: string | null }
  /** The room ended: nothing more will be said. */
  | { type: 'ended'; endedAt: string }
  | (ErrorEvent & { replyId?: string });

/** What a room's listeners get when the process running its actor died mid-line. */
export function roomLost(replyId: string): RoomEvent {
  return { type: 'error', message: 'The process running this room stopped mid-line; the room goes on elsewhere.', code: 'actor_lost', param: null, replyId };
}
