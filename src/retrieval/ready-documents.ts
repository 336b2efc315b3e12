import { and, eq } from 'drizzle-orm';
import type { Executor } from '../db/database.ts';
import { documents } from '../db/schema.ts';

/** Whether the character has any document retrieval can use. */
export async function hasReadyDocuments(db: Executor, characterId: string): Promise<boolean> {
  const rows = await db
    .select({ id: documents.id })
    .from(documents)
    .where(and(eq(documents.characterId, characterId), eq(documents.status, 'ready')))
    .limit(1);
  return rows.length > 0;
}
