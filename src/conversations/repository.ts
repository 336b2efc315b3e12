import { and, asc, desc, eq, max, sql } from 'drizzle-orm';
import { TroupeError } from '../errors.ts';
import type { Db, Executor } from '../db/database.ts';
import { conversations, messages, type MessageRole, type RecordedCapabilityCall } from '../db/schema.ts';
import { newId } from '../ids.ts';

export interface Conversation {
  id: string;
  createdAt: string;
  characterId: string;
}

export interface Message {
  id: string;
  conversationId: string;
  role: MessageRole;
  content: string;
  createdAt: string;
}

export interface StoredMessage extends Message {
  capabilityCalls: RecordedCapabilityCall[];
}

export async function insertConversation(db: Db, projectId: string, characterId: string): Promise<Conversation> {
  const [row] = await db.insert(conversations).values({ id: newId('conversation'), projectId, characterId }).returning();
  if (!row) throw new Error('insert returned no row');
  return toConversation(row);
}

export async function findConversation(db: Executor, projectId: string, id: string): Promise<Conversation | undefined> {
  const [row] = await db
    .select()
    .from(conversations)
    .where(and(eq(conversations.projectId, projectId), eq(conversations.id, id)));
  return row ? toConversation(row) : undefined;
}

export async function listMessages(db: Executor, conversationId: string): Promise<StoredMessage[]> {
  const rows = await db.select().from(messages).where(eq(messages.conversationId, conversationId)).orderBy(asc(messages.seq));
  return rows.map(toMessage);
}

/** The newest messages first, for building bounded history. */
export async function recentMessages(db: Executor, conversationId: string, limit: number): Promise<StoredMessage[]> {
  const rows = await db
    .select()
    .from(messages)
    .where(eq(messages.conversationId, conversationId))
    .orderBy(desc(messages.seq))
    .limit(limit);
  return rows.map(toMessage);
}

/**
 * Appends a message at the next position. The conversation row is locked for the insert, so
 * positions stay unique and gap-free even if two processes append at once.
 */
export async function appendMessage(
  db: Db,
  conversationId: string,
  role: MessageRole,
  content: string,
  capabilityCalls: RecordedCapabilityCall[] = [],
  epoch?: number,
): Promise<StoredMessage> {
  return db.transaction(async (tx) => {
    await lockAsOwner(tx, conversationId, epoch);
    const [last] = await tx.select({ seq: max(messages.seq) }).from(messages).where(eq(messages.conversationId, conversationId));
    const [row] = await tx
      .insert(messages)
      .values({ id: newId('message'), conversationId, seq: (last?.seq ?? 0) + 1, role, content, capabilityCalls })
      .returning();
    if (!row) throw new Error('insert returned no row');
    return toMessage(row);
  });
}

/**
 * Stores a player's message once per `clientKey`: a retry of the same call (its actor's process
 * died after storing it) gets the stored message back, with the character's reply when that was
 * stored too. Without a key, every call appends.
 */
export async function storePlayerMessage(
  db: Db,
  conversationId: string,
  content: string,
  clientKey: string | undefined,
  epoch?: number,
): Promise<{ message: StoredMessage; inserted: boolean; reply: StoredMessage | null }> {
  return db.transaction(async (tx) => {
    await lockAsOwner(tx, conversationId, epoch);
    const [last] = await tx.select({ seq: max(messages.seq) }).from(messages).where(eq(messages.conversationId, conversationId));
    // Insert first: a retry (the key stored already) is the rare case, so it alone reads more.
    const [row] = await tx
      .insert(messages)
      .values({ id: newId('message'), conversationId, seq: (last?.seq ?? 0) + 1, role: 'player', content, clientKey: clientKey ?? null })
      .onConflictDoNothing({ target: [messages.conversationId, messages.clientKey] })
      .returning();
    if (row) return { message: toMessage(row), inserted: true, reply: null };
    const [existing] = await tx.select().from(messages).where(and(eq(messages.conversationId, conversationId), eq(messages.clientKey, clientKey ?? '')));
    if (!existing) throw new Error('insert returned no row');
    if (existing.content !== content) {
      throw new TroupeError('conflict', 'This idempotency key was used for a different message in this conversation; use a new key for a new message.', {
        param: 'idempotencyKey',
        detailCode: 'idempotency_key_reused',
      });
    }
    const [next] = await tx.select().from(messages).where(and(eq(messages.conversationId, conversationId), eq(messages.seq, existing.seq + 1)));
    return { message: toMessage(existing), inserted: false, reply: next?.role === 'character' ? toMessage(next) : null };
  });
}

/** The next fencing token of the conversation's actor: a new actor takes it when it starts. */
export async function claimConversation(db: Db, conversationId: string): Promise<number> {
  const [row] = await db
    .update(conversations)
    .set({ ownerEpoch: sql`${conversations.ownerEpoch} + 1` })
    .where(eq(conversations.id, conversationId))
    .returning({ epoch: conversations.ownerEpoch });
  if (!row) throw new Error(`conversation ${conversationId} does not exist`);
  return row.epoch;
}

/**
 * Locks the conversation row for an append (positions stay gap-free across processes) and,
 * with `epoch`, refuses the write unless that actor is still the conversation's owner.
 */
async function lockAsOwner(tx: Executor, conversationId: string, epoch: number | undefined): Promise<void> {
  const [row] = await tx.select({ epoch: conversations.ownerEpoch }).from(conversations).where(eq(conversations.id, conversationId)).for('update');
  if (epoch !== undefined && row && row.epoch !== epoch) {
    throw new TroupeError('conflict', 'Another process took this conversation over; the message goes to it instead.', {
      detailCode: 'actor_superseded',
    });
  }
}

function toConversation(row: typeof conversations.$inferSelect): Conversation {
  return { id: row.id, createdAt: row.createdAt.toISOString(), characterId: row.characterId };
}

function toMessage(row: typeof messages.$inferSelect): StoredMessage {
  return {
    id: row.id,
    conversationId: row.conversationId,
    role: row.role,
    content: row.content,
    createdAt: row.createdAt.toISOString(),
    capabilityCalls: row.capabilityCalls,
  };
}

/** The interface's Message fields only. */
export function publicMessage(m: StoredMessage): Message {
  return { id: m.id, conversationId: m.conversationId, role: m.role, content: m.content, createdAt: m.createdAt };
}
