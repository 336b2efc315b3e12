import { and, eq, or, sql } from 'drizzle-orm';
import type { Executor } from '../../db/database.ts';
import { responses } from '../../db/schema.ts';
import type { OutputItem, ResponseObject } from './objects.ts';
import type { InputItem } from './schemas.ts';
import type { ContextItem } from './translate.ts';

/** Stored responses, always looked up within one project: another project's id reads as missing. */

export interface StoredResponse {
  id: string;
  model: string;
  /** The request's input as sent. */
  input: InputItem[];
  /** Every item the model was given, this input included (references resolved). */
  history: ContextItem[];
  output: OutputItem[];
  response: ResponseObject;
}

type Row = typeof responses.$inferSelect;
type Json = Record<string, unknown>[];

export async function insertResponse(db: Executor, projectId: string, stored: StoredResponse): Promise<void> {
  await db.insert(responses).values({
    id: stored.id,
    projectId,
    model: stored.model,
    input: stored.input as Json,
    history: stored.history as Json,
    output: stored.output as unknown as Json,
    response: stored.response,
  });
}

export async function findResponse(db: Executor, projectId: string, id: string): Promise<StoredResponse | undefined> {
  const [row] = await db
    .select()
    .from(responses)
    .where(and(eq(responses.projectId, projectId), eq(responses.id, id)));
  return row ? toStored(row) : undefined;
}

/** True when a response was deleted; false when the project has none with that id. */
export async function deleteResponse(db: Executor, projectId: string, id: string): Promise<boolean> {
  const deleted = await db
    .delete(responses)
    .where(and(eq(responses.projectId, projectId), eq(responses.id, id)))
    .returning({ id: responses.id });
  return deleted.length > 0;
}

/** An item (input or output) of any stored response of the project, by its id, for `item_reference`. */
export async function findItem(db: Executor, projectId: string, itemId: string): Promise<ContextItem | undefined> {
  const probe = JSON.stringify([{ id: itemId }]);
  const [row] = await db
    .select({ history: responses.history, output: responses.output })
    .from(responses)
    .where(and(eq(responses.projectId, projectId), or(sql`${responses.output} @> ${probe}::jsonb`, sql`${responses.history} @> ${probe}::jsonb`)))
    .limit(1);
  if (!row) return undefined;
  const items = [...row.output, ...row.history] as ContextItem[];
  return items.find((item) => 'id' in item && item.id === itemId);
}

function toStored(row: Row): StoredResponse {
  return {
    id: row.id,
    model: row.model,
    input: row.input as InputItem[],
    history: row.history as ContextItem[],
    output: row.output as unknown as OutputItem[],
    response: row.response as ResponseObject,
  };
}
