import { schema, t } from '@colyseus/schema';

/**
 * What a Colyseus game client sees of a conversation, synchronised by @colyseus/schema. The
 * same classes (by name) decode it on the client; the SDK can also reflect them.
 */
export const StateMessage = schema(
  {
    id: t.string(),
    role: t.string(),
    content: t.string(),
    createdAt: t.string(),
  },
  'ConversationMessage',
);
export type StateMessage = InstanceType<typeof StateMessage>;

export const StateCapabilityCall = schema(
  {
    characterId: t.string(),
    name: t.string(),
    /** The call's arguments as JSON text (schema fields are typed; arguments are free-form). */
    params: t.string(),
    callId: t.string(),
  },
  'ConversationCapabilityCall',
);
export type StateCapabilityCall = InstanceType<typeof StateCapabilityCall>;

export const ConversationState = schema(
  {
    conversationId: t.string(),
    characterId: t.string(),
    /** The most recent messages, oldest first (at most `RECENT_MESSAGES`). */
    messages: t.array(StateMessage),
    /** True while the character is producing a reply. */
    speaking: t.boolean(),
    /** The reply so far while `speaking`; empty otherwise. */
    partialReply: t.string(),
    /** The character's last capability call, if any. */
    lastCapability: t.ref(StateCapabilityCall).optional(),
  },
  'ConversationState',
);
export type ConversationState = InstanceType<typeof ConversationState>;

/** How many messages the synchronised state keeps; the full history is `GET /conversations/{id}`. */
export const RECENT_MESSAGES = 20;
