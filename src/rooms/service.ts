import { eq } from 'drizzle-orm';
import { z } from 'zod';
import type { CharacterService } from '../characters/service.ts';
import type { ConversationService } from '../conversations/service.ts';
import type { Db } from '../db/database.ts';
import { ROOM_MODES, roomParticipants, rooms } from '../db/room-schema.ts';
import { TroupeError, notFound } from '../errors.ts';
import type { Page } from '../projects/service.ts';
import {
  appendTranscriptEntry,
  claimRoom,
  endRoom,
  findActiveParticipant,
  findRoom,
  insertParticipant,
  insertRoom,
  listActiveRooms,
  listTranscript,
  markParticipantLeft,
  markRoomStarted,
  publicParticipant,
  publicRoom,
  publicTranscriptEntry,
  setDispatchId,
  type NewTranscriptEntry,
  type Participant,
  type Room,
  type RoomRefusal,
  type StoredParticipant,
  type StoredRoom,
  type TranscriptEntry,
} from './repository.ts';

/** The interface's fixed prefix of a character's identity in the WebRTC session. */
export const RTC_IDENTITY_PREFIX = 'agent-';

/** The rules of a new room, for every surface that creates one (limits from the interface). */
export const CreateRoomSchema = z.strictObject({
  name: z.string().trim().min(1, 'must not be empty').max(200),
  mode: z.enum(ROOM_MODES).default('freeform'),
  // Optional in either mode: a scripted room without one runs on the characters' own descriptions.
  scenePrompt: z.string().max(5000).nullable().default(null),
});
export type CreateRoomInput = z.infer<typeof CreateRoomSchema>;

/**
 * Seams for what runs rooms live (LiveKit agent dispatch, the room actor). The after-change
 * hooks are awaited: `participantAdded` throwing undoes the add (its row is deleted, so a
 * failed dispatch leaves no participant), `participantRemoved`/`ended` throwing fails the call
 * but keeps the change. The `...ing` hooks run before the change and may refuse it by
 * throwing (the caller can retry): LiveKit teardown goes there so a failed call changes
 * nothing. `room` is as read at the start of the call, and as ended for `ended`.
 */
export interface RoomHooks {
  participantAdded?(room: StoredRoom, participant: StoredParticipant): Promise<void>;
  /** Before `participant` (still in the room) leaves it. */
  participantLeaving?(room: StoredRoom, participant: StoredParticipant): Promise<void>;
  participantRemoved?(room: StoredRoom, participant: StoredParticipant): Promise<void>;
  /** Before the room ends; `active`: the participants in it as read. */
  ending?(room: StoredRoom, active: StoredParticipant[]): Promise<void>;
  /** `left`: the participants that were still in the room when it ended. */
  ended?(room: StoredRoom, left: StoredParticipant[]): Promise<void>;
}

export interface RoomDeps {
  db: Db;
  characters: CharacterService;
  conversations: ConversationService;
  /** May close over resources built after this service (they are called only per request). */
  hooks?: RoomHooks;
}

/**
 * Voice rooms: their membership and transcript. Ending is final: an ended room refuses
 * participants, removals, transcript entries and a second end (409 `room_ended`, as Stripe
 * refuses to cancel a canceled object), and is no longer listed.
 */
export class RoomService {
  readonly #deps: RoomDeps;
  readonly #hooks: RoomHooks;

  constructor(deps: RoomDeps) {
    this.#deps = deps;
    this.#hooks = deps.hooks ?? {};
  }

  async create(projectId: string, input: CreateRoomInput): Promise<Room> {
    return publicRoom(await insertRoom(this.#deps.db, projectId, input));
  }

  /** Active rooms (not ended) in creation order, each with the participants still in it. */
  async list(projectId: string, page: Page): Promise<Room[]> {
    return (await listActiveRooms(this.#deps.db, projectId, page)).map(publicRoom);
  }

  /** The room with every participant it had; those that left carry `leftAt`. */
  async get(projectId: string, roomId: string): Promise<Room> {
    return publicRoom(await this.find(projectId, roomId));
  }

  /** The room with what only the service keeps (dispatch ids, `startedAt`). */
  async find(projectId: string, roomId: string): Promise<StoredRoom> {
    const room = await findRoom(this.#deps.db, projectId, roomId);
    if (!room) throw notFound('room', roomId);
    return room;
  }

  /**
   * The room whatever its project, for callers that know only its id (LiveKit webhooks name
   * rooms by id; ids are unique across projects).
   */
  async findById(roomId: string): Promise<StoredRoom | undefined> {
    const [row] = await this.#deps.db.select({ projectId: rooms.projectId }).from(rooms).where(eq(rooms.id, roomId));
    return row ? findRoom(this.#deps.db, row.projectId, roomId) : undefined;
  }

  /**
   * Puts a character of the project in the room with a conversation of its own (its memory of
   * the room). When two adds of one character race, the loser's conversation stays, unused.
   */
  async addParticipant(projectId: string, roomId: string, characterId: string): Promise<Participant> {
    const room = await this.find(projectId, roomId);
    if (room.endedAt) throw roomEnded(room, 'takes no more participants');
    try {
      await this.#deps.characters.get(projectId, characterId);
    } catch (err) {
      // Named as the body field, unlike the path's ids: the caller sent a bad reference.
      if (err instanceof TroupeError && err.code === 'not_found') throw notFound('character', characterId, 'characterId');
      throw err;
    }
    // Checked before a conversation is made for nothing; the unique index decides races.
    if (await findActiveParticipant(this.#deps.db, roomId, characterId)) throw participantExists(roomId, characterId);
    const conversation = await this.#deps.conversations.create(projectId, characterId);
    const added = await insertParticipant(this.#deps.db, {
      roomId,
      characterId,
      conversationId: conversation.id,
      rtcIdentity: RTC_IDENTITY_PREFIX + characterId,
    });
    if (added === 'participant_exists') throw participantExists(roomId, characterId);
    if (typeof added === 'string') throw await this.#refusal(projectId, roomId, added, 'takes no more participants');
    try {
      await this.#hooks.participantAdded?.(room, added);
    } catch (err) {
      // The add did not happen (e.g. LiveKit refused the dispatch); its conversation stays, unused.
      await this.#deps.db.delete(roomParticipants).where(eq(roomParticipants.id, added.id));
      throw err;
    }
    return publicParticipant(added);
  }

  /** The character leaves the room; its participation is kept with `leftAt`. */
  async removeParticipant(projectId: string, roomId: string, characterId: string): Promise<Participant> {
    const room = await this.find(projectId, roomId);
    if (room.endedAt) throw roomEnded(room, 'has no participants to remove');
    const leaving = room.participants.find((p) => p.characterId === characterId && p.leftAt === null);
    if (!leaving) throw notInRoom(roomId, characterId);
    await this.#hooks.participantLeaving?.(room, leaving);
    const left = await markParticipantLeft(this.#deps.db, roomId, characterId);
    if (!left) throw notInRoom(roomId, characterId);
    await this.#hooks.participantRemoved?.(room, left);
    return publicParticipant(left);
  }

  /** Everything said in the room, in the order it was said. */
  async transcript(projectId: string, roomId: string): Promise<TranscriptEntry[]> {
    await this.find(projectId, roomId);
    return this.entries(roomId);
  }

  /** The transcript of a room the caller has already found (the room actor, on its hot path). */
  async entries(roomId: string): Promise<TranscriptEntry[]> {
    return (await listTranscript(this.#deps.db, roomId)).map(publicTranscriptEntry);
  }

  /**
   * Stores what was said (for the room actor). An agent's entry names its character and gets
   * the character's name when none is given; a user's names no character.
   */
  async appendTranscript(
    projectId: string,
    roomId: string,
    entry: Omit<NewTranscriptEntry, 'speakerName'> & { speakerName?: string | null },
    /** The room actor's fencing token (see `claim`). */
    epoch?: number,
  ): Promise<TranscriptEntry> {
    return (await this.appendTranscriptOnce(projectId, roomId, entry, epoch)).entry;
  }

  /** As appendTranscript, saying whether the entry is new or was stored before under its `clientKey`. */
  async appendTranscriptOnce(
    projectId: string,
    roomId: string,
    entry: Omit<NewTranscriptEntry, 'speakerName'> & { speakerName?: string | null },
    epoch?: number,
  ): Promise<{ entry: TranscriptEntry; inserted: boolean }> {
    if ((entry.speakerType === 'agent') !== (entry.characterId !== null)) {
      throw new TroupeError('invalid_request', 'An agent entry names its character; a user entry names none.', { param: 'characterId' });
    }
    let speakerName = entry.speakerName ?? null;
    if (entry.characterId !== null) {
      // Also keeps another project's character out of this transcript (reads are cached).
      const character = await this.#deps.characters.get(projectId, entry.characterId);
      speakerName ??= character.name;
    }
    // The room's project is checked by the append itself (another project's room is not found).
    const appended = await appendTranscriptEntry(this.#deps.db, projectId, roomId, { ...entry, speakerName }, epoch);
    if (typeof appended === 'string') throw await this.#refusal(projectId, roomId, appended, 'takes no more transcript entries');
    if (!appended.inserted && appended.entry.content !== entry.content) {
      throw new TroupeError('conflict', 'This idempotency key was used for a different line in this room; use a new key for a new line.', {
        param: 'idempotencyKey',
        detailCode: 'idempotency_key_reused',
      });
    }
    return { entry: publicTranscriptEntry(appended.entry), inserted: appended.inserted };
  }

  /** The room if it may start: not ended (409) and with at least one participant (400). */
  async findStartable(projectId: string, roomId: string): Promise<StoredRoom> {
    const room = await this.find(projectId, roomId);
    if (room.endedAt) throw roomEnded(room, 'cannot start');
    if (!room.participants.some((p) => p.leftAt === null)) {
      throw new TroupeError('invalid_request', `Room '${roomId}' has no participants; add a character before starting it.`, {
        detailCode: 'room_has_no_participants',
      });
    }
    return room;
  }

  /**
   * Records that the room's voice pipelines started (for the start endpoint), under the rules
   * of `findStartable`; `first` is false when it had started before.
   */
  async markStarted(projectId: string, roomId: string): Promise<{ room: StoredRoom; first: boolean }> {
    const room = await this.findStartable(projectId, roomId);
    const first = await markRoomStarted(this.#deps.db, roomId);
    return { room: first ? await this.find(projectId, roomId) : room, first };
  }

  /** Makes the caller (a room actor) the room's owner: the fencing token its writes must carry. */
  claim(roomId: string): Promise<number> {
    return claimRoom(this.#deps.db, roomId);
  }

  /** Remembers the LiveKit agent dispatch serving a participant (null when it is gone). */
  async setDispatchId(participantId: string, dispatchId: string | null): Promise<void> {
    await setDispatchId(this.#deps.db, participantId, dispatchId);
  }

  /** Ends the room; every participant still in it leaves at the same instant. */
  async end(projectId: string, roomId: string): Promise<Room> {
    const room = await this.find(projectId, roomId);
    if (room.endedAt) throw roomEnded(room, 'cannot end again');
    await this.#hooks.ending?.(room, room.participants.filter((p) => p.leftAt === null));
    const left = await endRoom(this.#deps.db, roomId);
    const ended = await this.find(projectId, roomId);
    // Another request ended it between our read and our write: the same answer as ending twice.
    if (!left) throw roomEnded(ended, 'cannot end again');
    await this.#hooks.ended?.(ended, left);
    return publicRoom(ended);
  }

  /** The error for a write the repository refused after the room was read as open. */
  async #refusal(projectId: string, roomId: string, refusal: RoomRefusal, what: string): Promise<TroupeError> {
    const room = await findRoom(this.#deps.db, projectId, roomId);
    return refusal === 'room_ended' && room ? roomEnded(room, what) : notFound('room', roomId);
  }
}

export function roomEnded(room: StoredRoom, what: string): TroupeError {
  return new TroupeError('conflict', `Room '${room.id}' ended at ${room.endedAt ?? 'an earlier time'} and ${what}.`, { detailCode: 'room_ended' });
}

function notInRoom(roomId: string, characterId: string): TroupeError {
  return new TroupeError('not_found', `Character '${characterId}' is not in room '${roomId}'.`, { detailCode: 'participant_not_found' });
}

function participantExists(roomId: string, characterId: string): TroupeError {
  return new TroupeError('conflict', `Character '${characterId}' is already in room '${roomId}'.`, {
    param: 'characterId',
    detailCode: 'participant_exists',
  });
}
