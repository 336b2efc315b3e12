import { sql } from 'drizzle-orm';
import { index, integer, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { characters, conversations, createdAt, projects } from './schema.ts';

// Voice rooms: the room, its character participants and its transcript.

export const ROOM_MODES = ['freeform', 'scripted'] as const;
export type RoomMode = (typeof ROOM_MODES)[number];

/** A multi-character voice room. Active while `ended_at` is null; an ended room never reopens. */
export const rooms = pgTable(
  'rooms',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    mode: text('mode', { enum: ROOM_MODES }).notNull().default('freeform'),
    scenePrompt: text('scene_prompt'),
    /**
     * The seq of the last transcript entry: appends bump it with the room row locked, so
     * entries of one room are numbered without gaps even when several processes append.
     */
    lastSeq: integer('last_seq').notNull().default(0),
    /** The fencing token of the room's actor: each new actor bumps it; older ones' writes are refused. */
    ownerEpoch: integer('owner_epoch').notNull().default(0),
    createdAt: createdAt(),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }),
    endedAt: timestamp('ended_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('rooms_project_idx').on(t.projectId, t.id),
    // GET /v1/rooms lists only active rooms; ended ones pile up and are never listed.
    index('rooms_project_active_idx').on(t.projectId, t.id).where(sql`${t.endedAt} is null`),
  ],
);

/** A character's membership of a room; leaving keeps the row (with `left_at`) for the record. */
export const roomParticipants = pgTable(
  'room_participants',
  {
    id: text('id').primaryKey(),
    roomId: text('room_id')
      .notNull()
      .references(() => rooms.id, { onDelete: 'cascade' }),
    characterId: text('character_id')
      .notNull()
      .references(() => characters.id, { onDelete: 'cascade' }),
    /** The participant's own conversation: its memory of what it said and heard. */
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    rtcIdentity: text('rtc_identity').notNull(),
    /** The LiveKit agent dispatch serving this participant, once one was made. */
    dispatchId: text('dispatch_id'),
    createdAt: createdAt(),
    leftAt: timestamp('left_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('room_participants_room_idx').on(t.roomId, t.id),
    // A character is in a room at most once at a time; it may rejoin after leaving.
    uniqueIndex('room_participants_active_idx').on(t.roomId, t.characterId).where(sql`${t.leftAt} is null`),
  ],
);

export const SPEAKER_TYPES = ['user', 'agent'] as const;
export type SpeakerType = (typeof SPEAKER_TYPES)[number];

export const roomTranscriptEntries = pgTable(
  'room_transcript_entries',
  {
    id: text('id').primaryKey(),
    roomId: text('room_id')
      .notNull()
      .references(() => rooms.id, { onDelete: 'cascade' }),
    /** Position in the room's transcript: the order things were said in (see rooms.last_seq). */
    seq: integer('seq').notNull(),
    speakerType: text('speaker_type', { enum: SPEAKER_TYPES }).notNull(),
    /** Null for users; kept (set null) when the character is deleted, with `speaker_name`. */
    characterId: text('character_id').references(() => characters.id, { onDelete: 'set null' }),
    /** The name shown for the speaker when it was said (a user's display name, a character's name). */
    speakerName: text('speaker_name'),
    content: text('content').notNull(),
    /** The writer's key for an entry: a retried append finds the entry instead of storing it twice. */
    clientKey: text('client_key'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('room_transcript_entries_room_seq_idx').on(t.roomId, t.seq),
    uniqueIndex('room_transcript_entries_room_client_key_idx').on(t.roomId, t.clientKey),
  ],
);
