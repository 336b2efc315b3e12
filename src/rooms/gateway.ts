import type { SeatRequest } from '../conversations/gateway.ts';
import type { RoomEvent } from './events.ts';
import type { TranscriptEntry } from './repository.ts';

/** A player's line: typed in a text client, or transcribed speech from the voice session. */
export interface SpokenLine {
  content: string;
  speakerName: string | null;
}

/** A voice agent's account of a character's line once it has played: what the listeners heard. */
export interface SpokenReport {
  replyId: string;
  /** The character whose agent reported (from its token, not from what it sent). */
  characterId: string;
  /** The line as heard: cut at the interruption when a human spoke over it. */
  text: string;
  interrupted: boolean;
}

/** What changed in a room that its actor must know (membership, start, end). */
export type RoomChange = { kind: 'participants' } | { kind: 'started' } | { kind: 'ended'; endedAt: string };

/**
 * How every surface reaches a room: the REST routes, the room WebSocket, Colyseus game clients
 * and (part 2) the voice agents. The room's actor may run in any process; implementations
 * find or make it (`actors/room-actors.ts`). Ids of another project's rooms are not found.
 */
export interface RoomGateway {
  /** Stores the line (and returns its transcript entry) once it is the room's; the characters answer after. */
  /** With the client's `idempotencyKey`, a retried line is stored and answered once. */
  say(projectId: string, roomId: string, line: SpokenLine, idempotencyKey?: string): Promise<TranscriptEntry>;
  /** Tells the room's actor, if one runs, that the stored room changed. */
  changed(projectId: string, roomId: string, change: RoomChange): Promise<void>;
  /** A live client's answer to a client_function_call; false when nothing waits for `callId`. */
  capabilityResult(roomId: string, callId: string, result: unknown): Promise<boolean>;
  /** The room's events from now on; `onLost` if delivery can no longer be complete. */
  subscribe(roomId: string, listener: (event: RoomEvent) => void, onLost?: () => void): Promise<() => void>;
  /** A seat in the room's Colyseus room for a game client, wherever the room runs. */
  reserveSeat(projectId: string, roomId: string, request: SeatRequest): Promise<Record<string, unknown>>;
  /**
   * A character's voice agent is connected (true) or gone (false). While one is, the room waits
   * for each of that character's lines to be spoken before it goes on, and stores it as heard.
   */
  voice(projectId: string, roomId: string, characterId: string, attached: boolean): Promise<void>;
  /** A voice agent's report on a line it played; false when the room no longer waits for it. */
  spoken(roomId: string, report: SpokenReport): Promise<boolean>;
  /** Publishes an event the room's actor did not make itself (a human joining the voice session). */
  announce(roomId: string, event: RoomEvent): void;
}
