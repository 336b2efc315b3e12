import { and, asc, eq, gt, inArray, isNull, notExists, sql } from 'drizzle-orm';
import type { Db, Executor } from '../db/database.ts';
import { roomParticipants, rooms, roomTranscriptEntries, type RoomMode, type SpeakerType } from '../db/room-schema.ts';
import { TroupeError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Page } from '../projects/service.ts';

/** The interface's Room. */
export interface Room {
  id: string;
  createdAt: string;
  projectId: string;
  name: string;
  mode: RoomMode;
  scenePrompt: string | null;
  endedAt: string | null;
  participants: Participant[];
}

/** The interface's Participant. */
export interface Participant {
  id: string;
  createdAt: string;
  roomId: string;
  characterId: string;
  conversationId: string;
  rtcIdentity: string;
  leftAt: string | null;
}

/** The interface's Transcript entry, plus `speakerName` (who it was, as shown when said). */
export interface TranscriptEntry {
  id: string;
  createdAt: string;
  roomId: string;
  speakerType: SpeakerType;
  characterId: string | null;
  speakerName: string | null;
  content: string;
}

/** What the service keeps beyond the interface's fields (for voice dispatch and the room actor). */
export interface StoredParticipant extends Participant {
  dispatchId: string | null;
}

export interface StoredRoom extends Omit<Room, 'participants'> {
  startedAt: string | null;
  participants: StoredParticipant[];
}

export interface StoredTranscriptEntry extends TranscriptEntry {
  seq: number;
}

export interface NewRoom {
  name: string;
  mode: RoomMode;
  scenePrompt: string | null;
}

export interface NewParticipant {
  roomId: string;
  characterId: string;
  conversationId: string;
  rtcIdentity: string;
}

export interface NewTranscriptEntry {
  speakerType: SpeakerType;
  characterId: string | null;
  speakerName: string | null;
  content: string;
  /** Makes the append exactly-once: a retry with the same key gets the stored entry back. */
  clientKey?: string | undefined;
}

type RoomRow = typeof rooms.$inferSelect;
type ParticipantRow = typeof roomParticipants.$inferSelect;
type EntryRow = typeof roomTranscriptEntries.$inferSelect;

/** Why a write to a room was refused: the room does not exist, or it has ended. */
export type RoomRefusal = 'room_missing' | 'room_ended';

export async function insertRoom(db: Executor, projectId: string, room: NewRoom): Promise<StoredRoom> {
  const [row] = await db
    .insert(rooms)
    .values({ id: newId('room'), projectId, ...room })
    .returning();
  if (!row) throw new Error('insert returned no row');
  return toRoom(row, []);
}

/** A room of the project with every participant it ever had, in the order they joined. */
export async function findRoom(db: Executor, projectId: string, roomId: string): Promise<StoredRoom | undefined> {
  const [row] = await db
    .select()
    .from(rooms)
    .where(and(eq(rooms.projectId, projectId), eq(rooms.id, roomId)));
  if (!row) return undefined;
  const participants = await db.select().from(roomParticipants).where(eq(roomParticipants.roomId, roomId)).orderBy(asc(roomParticipants.id));
  return toRoom(row, participants);
}

/** Rooms that have not ended, in creation order, each with the participants still in it. */
export async function listActiveRooms(db: Executor, projectId: string, page: Page): Promise<StoredRoom[]> {
  const rows = await db
    .select()
    .from(rooms)
    .where(and(eq(rooms.projectId, projectId), isNull(rooms.endedAt), page.after ? gt(rooms.id, page.after) : undefined))
    .orderBy(asc(rooms.id))
    .limit(page.limit);
  if (rows.length === 0) return [];
  const participants = await db
    .select()
    .from(roomParticipants)
    .where(and(inArray(roomParticipants.roomId, rows.map((r) => r.id)), isNull(roomParticipants.leftAt)))
    .orderBy(asc(roomParticipants.id));
  return rows.map((row) => toRoom(row, participants.filter((p) => p.roomId === row.id)));
}

export async function findActiveParticipant(db: Executor, roomId: string, characterId: string): Promise<StoredParticipant | undefined> {
  const [row] = await db
    .select()
    .from(roomParticipants)
    .where(and(eq(roomParticipants.roomId, roomId), eq(roomParticipants.characterId, characterId), isNull(roomParticipants.leftAt)));
  return row ? toParticipant(row) : undefined;
}

/**
 * Adds a participant under the room's row lock, so it cannot slip in after `endRoom`. The
 * partial unique index (one active row per character) decides between two concurrent adds:
 * the loser inserts nothing and gets `participant_exists`.
 */
export async function insertParticipant(db: Db, values: NewParticipant): Promise<StoredParticipant | RoomRefusal | 'participant_exists'> {
  return db.transaction(async (tx) => {
    const refusal = await lockOpenRoom(tx, values.roomId);
    if (refusal) return refusal;
    const [row] = await tx
      .insert(roomParticipants)
      .values({ id: newId('participant'), ...values })
      .onConflictDoNothing()
      .returning();
    return row ? toParticipant(row) : 'participant_exists';
  });
}

/** Marks the character's active participation as left; undefined when it is not in the room. */
export async function markParticipantLeft(db: Executor, roomId: string, characterId: string): Promise<StoredParticipant | undefined> {
  const [row] = await db
    .update(roomParticipants)
    .set({ leftAt: sql`now()` })
    .where(and(eq(roomParticipants.roomId, roomId), eq(roomParticipants.characterId, characterId), isNull(roomParticipants.leftAt)))
    .returning();
  return row ? toParticipant(row) : undefined;
}

export async function setDispatchId(db: Executor, participantId: string, dispatchId: string | null): Promise<boolean> {
  const updated = await db.update(roomParticipants).set({ dispatchId }).where(eq(roomParticipants.id, participantId)).returning({ id: roomParticipants.id });
  return updated.length > 0;
}

/** Sets `started_at` the first time; false when the room had started already or has ended. */
export async function markRoomStarted(db: Executor, roomId: string): Promise<boolean> {
  const updated = await db
    .update(rooms)
    .set({ startedAt: sql`now()` })
    .where(and(eq(rooms.id, roomId), isNull(rooms.startedAt), isNull(rooms.endedAt)))
    .returning({ id: rooms.id });
  return updated.length > 0;
}

/**
 * Ends the room and, at the same instant, every participation still open in it. Returns the
 * participants that were still in the room, or undefined when it had ended already.
 */
export async function endRoom(db: Db, roomId: string): Promise<StoredParticipant[] | undefined> {
  return db.transaction(async (tx) => {
    // now() is the transaction's start, so endedAt and these leftAt are the same instant.
    const [ended] = await tx
      .update(rooms)
      .set({ endedAt: sql`now()` })
      .where(and(eq(rooms.id, roomId), isNull(rooms.endedAt)))
      .returning({ id: rooms.id });
    if (!ended) return undefined;
    const left = await tx
      .update(roomParticipants)
      .set({ leftAt: sql`now()` })
      .where(and(eq(roomParticipants.roomId, roomId), isNull(roomParticipants.leftAt)))
      .returning();
    return left.map(toParticipant).sort((a, b) => (a.id < b.id ? -1 : 1));
  });
}

/**
 * Appends an entry at the room's next seq: one UPDATE bumps the room's last seq (locking the
 * row, so appends from any number of processes are numbered in order) only if the room is the
 * project's, open, still this actor's, and the client key is new; then one INSERT. Only when
 * the UPDATE finds nothing does a second look say why: a client key already stored returns
 * that entry (`inserted: false`), a missing or ended room is refused, a superseded actor throws.
 */
export async function appendTranscriptEntry(
  db: Db,
  projectId: string,
  roomId: string,
  entry: NewTranscriptEntry,
  /** The writing actor's fencing token (see `claimRoom`); refused once another actor claimed the room. */
  epoch?: number,
): Promise<{ entry: StoredTranscriptEntry; inserted: boolean } | RoomRefusal> {
  return db.transaction(async (tx) => {
    const byKey = (key: string) => and(eq(roomTranscriptEntries.roomId, roomId), eq(roomTranscriptEntries.clientKey, key));
    const open = [eq(rooms.id, roomId), eq(rooms.projectId, projectId), isNull(rooms.endedAt)];
    if (epoch !== undefined) open.push(eq(rooms.ownerEpoch, epoch));
    if (entry.clientKey !== undefined) open.push(notExists(tx.select({ one: sql`1` }).from(roomTranscriptEntries).where(byKey(entry.clientKey))));
    const [next] = await tx
      .update(rooms)
      .set({ lastSeq: sql`${rooms.lastSeq} + 1` })
      .where(and(...open))
      .returning({ seq: rooms.lastSeq });
    if (next) {
      const [row] = await tx
        .insert(roomTranscriptEntries)
        .values({ id: newId('transcriptEntry'), roomId, seq: next.seq, ...entry, clientKey: entry.clientKey ?? null })
        // The same key appended at the same moment by another caller (a seq is skipped then).
        .onConflictDoNothing({ target: [roomTranscriptEntries.roomId, roomTranscriptEntries.clientKey] })
        .returning();
      if (row) return { entry: toEntry(row), inserted: true };
    }
    const [room] = await tx
      .select({ endedAt: rooms.endedAt, epoch: rooms.ownerEpoch })
      .from(rooms)
      .where(and(eq(rooms.id, roomId), eq(rooms.projectId, projectId)))
      .for('update');
    if (!room) return 'room_missing';
    if (epoch !== undefined && room.epoch !== epoch) {
      throw new TroupeError('conflict', 'Another process took this room over; the line goes to it instead.', { detailCode: 'actor_superseded' });
    }
    if (entry.clientKey !== undefined) {
      // Before the ended check: a retry of an entry stored just before the room ended still succeeds.
      const [existing] = await tx.select().from(roomTranscriptEntries).where(byKey(entry.clientKey));
      if (existing) return { entry: toEntry(existing), inserted: false };
    }
    if (room.endedAt) return 'room_ended';
    throw new Error(`room ${roomId} took no entry and gave no reason`);
  });
}

/** Makes the caller the room's owner: the fencing token its transcript writes must carry. */
export async function claimRoom(db: Executor, roomId: string): Promise<number> {
  const [row] = await db
    .update(rooms)
    .set({ ownerEpoch: sql`${rooms.ownerEpoch} + 1` })
    .where(eq(rooms.id, roomId))
    .returning({ epoch: rooms.ownerEpoch });
  return row?.epoch ?? 0;
}

/** The whole transcript in the order it was spoken. */
export async function listTranscript(db: Executor, roomId: string): Promise<StoredTranscriptEntry[]> {
  const rows = await db.select().from(roomTranscriptEntries).where(eq(roomTranscriptEntries.roomId, roomId)).orderBy(asc(roomTranscriptEntries.seq));
  return rows.map(toEntry);
}

/** Locks the room row for a change of its membership; says why not when it is missing or ended. */
async function lockOpenRoom(tx: Executor, roomId: string): Promise<RoomRefusal | undefined> {
  const [row] = await tx.select({ endedAt: rooms.endedAt }).from(rooms).where(eq(rooms.id, roomId)).for('update');
  if (!row) return 'room_missing';
  return row.endedAt ? 'room_ended' : undefined;
}

function toRoom(row: RoomRow, participants: ParticipantRow[]): StoredRoom {
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    projectId: row.projectId,
    name: row.name,
    mode: row.mode,
    scenePrompt: row.scenePrompt,
    startedAt: row.startedAt?.toISOString() ?? null,
    endedAt: row.endedAt?.toISOString() ?? null,
    participants: participants.map(toParticipant),
  };
}

function toParticipant(row: ParticipantRow): StoredParticipant {
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    roomId: row.roomId,
    characterId: row.characterId,
    conversationId: row.conversationId,
    rtcIdentity: row.rtcIdentity,
    dispatchId: row.dispatchId,
    leftAt: row.leftAt?.toISOString() ?? null,
  };
}

function toEntry(row: EntryRow): StoredTranscriptEntry {
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    roomId: row.roomId,
    seq: row.seq,
    speakerType: row.speakerType,
    characterId: row.characterId,
    speakerName: row.speakerName,
    content: row.content,
  };
}

/** The interface's Room fields only. */
export function publicRoom(room: StoredRoom): Room {
  return {
    id: room.id,
    createdAt: room.createdAt,
    projectId: room.projectId,
    name: room.name,
    mode: room.mode,
    scenePrompt: room.scenePrompt,
    endedAt: room.endedAt,
    participants: room.participants.map(publicParticipant),
  };
}

export function publicParticipant(p: StoredParticipant): Participant {
  return { id: p.id, createdAt: p.createdAt, roomId: p.roomId, characterId: p.characterId, conversationId: p.conversationId, rtcIdentity: p.rtcIdentity, leftAt: p.leftAt };
}

export function publicTranscriptEntry(e: StoredTranscriptEntry): TranscriptEntry {
  return { id: e.id, createdAt: e.createdAt, roomId: e.roomId, speakerType: e.speakerType, characterId: e.characterId, speakerName: e.speakerName, content: e.content };
}
