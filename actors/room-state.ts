import { schema, t } from '@colyseus/schema';

/** What a Colyseus game client sees of a room, synchronised by @colyseus/schema. */
export const RoomMember = schema(
  {
    characterId: t.string(),
    name: t.string(),
    conversationId: t.string(),
    rtcIdentity: t.string(),
  },
  'RoomMember',
);
export type RoomMember = InstanceType<typeof RoomMember>;

export const RoomLine = schema(
  {
    id: t.string(),
    speakerType: t.string(),
    /** Empty for players. */
    characterId: t.string(),
    speakerName: t.string(),
    content: t.string(),
    createdAt: t.string(),
  },
  'RoomLine',
);
export type RoomLine = InstanceType<typeof RoomLine>;

export const RoomState = schema(
  {
    roomId: t.string(),
    name: t.string(),
    mode: t.string(),
    /** `created`, `live` or `ended`. */
    status: t.string(),
    /** The characters in the room now. */
    members: t.array(RoomMember),
    /** The character holding the floor; empty while the floor is the humans'. */
    speaking: t.string(),
    /** The speaking character's line so far. */
    partialLine: t.string(),
    /** The most recent transcript entries, oldest first (at most `RECENT_LINES`). */
    transcript: t.array(RoomLine),
  },
  'RoomState',
);
export type RoomState = InstanceType<typeof RoomState>;

/** How many lines the synchronised state keeps; the whole transcript is `GET /v1/rooms/{id}/transcript`. */
export const RECENT_LINES = 20;
