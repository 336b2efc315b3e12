import { and, asc, eq, getTableName, gt, lt, ne, or, sql } from 'drizzle-orm';
import type { CopyColumn } from '../db/copy-rows.ts';
import type { Database, Db, Executor } from '../db/database.ts';
import { documentParts, documents } from '../db/schema.ts';
import { newId } from '../ids.ts';
import type { Page } from '../projects/service.ts';
import type { DocumentStatus } from '../../machines/document-status.ts';

/** The Document resource, as the interface defines it. */
export interface DocumentInfo {
  id: string;
  createdAt: string;
  characterId: string;
  name: string;
  mimeType: string;
  fileSize: number;
  status: DocumentStatus;
  chunkCount: number;
  errorMessage: string | null;
}

/** A document as the queue sees it. */
export interface QueuedDocument {
  id: string;
  projectId: string;
  characterId: string;
  mimeType: string;
  status: DocumentStatus;
  generation: number;
  attempts: number;
}

type Row = typeof documents.$inferSelect;

/** Every column but the original bytes, which only the worker that parses them reads. */
const INFO_COLUMNS = {
  id: documents.id,
  projectId: documents.projectId,
  characterId: documents.characterId,
  name: documents.name,
  mimeType: documents.mimeType,
  fileSize: documents.fileSize,
  status: documents.status,
  chunkCount: documents.chunkCount,
  errorMessage: documents.errorMessage,
  generation: documents.generation,
  attempts: documents.attempts,
  createdAt: documents.createdAt,
};

type InfoRow = Pick<Row, keyof typeof INFO_COLUMNS>;

/**
 * A new document in `uploading`, which no read shows and the queue never claims: its parts are
 * stored next (storePart), each in a statement of its own, and finishUpload queues it.
 */
export async function insertUploading(db: Executor, input: { projectId: string; characterId: string; name: string; mimeType: string; fileSize: number }): Promise<string> {
  const id = newId('document');
  await db.insert(documents).values({ id, ...input, status: 'uploading' });
  return id;
}

/** What storing a part takes: the statements, and the way rows with large bytes are written. */
export type PartStore = Pick<Database, 'db' | 'copyRows'>;

const PART_TABLE = getTableName(documentParts);
const PART_COLUMNS: readonly CopyColumn[] = [
  { name: documentParts.documentId.name, type: 'text' },
  { name: documentParts.part.name, type: 'int4' },
  { name: documentParts.bytes.name, type: 'bytea' },
];

/**
 * Stores one piece of the original (at most CONTENT_PIECE_BYTES); the upload counts as alive.
 * The bytes go as they are (copyRows): as a parameter, the drivers' hex or base64 text and its
 * copies came to about 5 MiB of short-lived memory per 1 MiB part on this thread, and V8 ran a
 * full collection every few parts.
 */
export async function storePart(store: PartStore, id: string, part: number, piece: Uint8Array): Promise<void> {
  await store.copyRows(PART_TABLE, PART_COLUMNS, [[id, part, piece]]);
  await store.db.update(documents).set({ updatedAt: new Date() }).where(and(eq(documents.id, id), eq(documents.status, 'uploading')));
}

/** The original's pieces, in order, as storePart takes them. */
export function* contentPieces(content: Uint8Array): Generator<Uint8Array> {
  for (let offset = 0; offset < content.byteLength; offset += CONTENT_PIECE_BYTES) yield content.subarray(offset, offset + CONTENT_PIECE_BYTES);
}

/** `uploading` -> `pending`; undefined when the document is gone (its character was deleted meanwhile). */
export async function finishUpload(db: Executor, id: string): Promise<DocumentInfo | undefined> {
  const [row] = await db
    .update(documents)
    .set({ status: 'pending', updatedAt: new Date() })
    .where(and(eq(documents.id, id), eq(documents.status, 'uploading')))
    .returning(INFO_COLUMNS);
  return row ? toInfo(row) : undefined;
}

/** Uploads whose process died before finishing them: no part stored for `staleMs`. */
export async function removeStaleUploads(db: Executor, staleMs: number): Promise<number> {
  const rows = await db
    .delete(documents)
    .where(and(eq(documents.status, 'uploading'), lt(documents.updatedAt, sql`now() - make_interval(secs => ${staleMs / 1000})`)))
    .returning({ id: documents.id });
  return rows.length;
}

export async function findDocument(db: Executor, projectId: string, characterId: string, id: string, lock = false): Promise<(DocumentInfo & QueuedDocument) | undefined> {
  const query = db
    .select(INFO_COLUMNS)
    .from(documents)
    .where(and(eq(documents.projectId, projectId), eq(documents.characterId, characterId), eq(documents.id, id), ne(documents.status, 'uploading')));
  const [row] = lock ? await query.for('update') : await query;
  return row ? { ...toInfo(row), ...toQueued(row) } : undefined;
}

export async function listDocuments(db: Executor, projectId: string, characterId: string, page: Page): Promise<DocumentInfo[]> {
  const rows = await db
    .select(INFO_COLUMNS)
    .from(documents)
    .where(and(eq(documents.projectId, projectId), eq(documents.characterId, characterId), ne(documents.status, 'uploading'), page.after ? gt(documents.id, page.after) : undefined))
    .orderBy(asc(documents.id))
    .limit(page.limit);
  return rows.map(toInfo);
}

export async function setStatus(
  db: Executor,
  id: string,
  change: { status: DocumentStatus; chunkCount?: number; errorMessage?: string | null; bumpGeneration?: boolean },
): Promise<DocumentInfo | undefined> {
  const [row] = await db
    .update(documents)
    .set({
      status: change.status,
      ...(change.chunkCount === undefined ? {} : { chunkCount: change.chunkCount }),
      ...(change.errorMessage === undefined ? {} : { errorMessage: change.errorMessage }),
      ...(change.bumpGeneration ? { generation: sql`${documents.generation} + 1`, attempts: 0 } : {}),
      leaseOwner: change.status === 'processing' ? undefined : null,
      leaseExpiresAt: change.status === 'processing' ? undefined : null,
      updatedAt: new Date(),
    })
    .where(eq(documents.id, id))
    .returning(INFO_COLUMNS);
  return row ? toInfo(row) : undefined;
}

export async function deleteDocumentRow(db: Executor, id: string): Promise<void> {
  await db.delete(documents).where(eq(documents.id, id));
}

/**
 * The next document to process, locked: a pending one, or one whose worker's lease ran out
 * (its process died). SKIP LOCKED lets several processes claim different documents at once.
 */
export async function lockNextQueued(db: Executor): Promise<QueuedDocument | undefined> {
  const [row] = await db
    .select(INFO_COLUMNS)
    .from(documents)
    .where(or(eq(documents.status, 'pending'), and(eq(documents.status, 'processing'), lt(documents.leaseExpiresAt, sql`now()`))))
    .orderBy(asc(documents.createdAt))
    .limit(1)
    .for('update', { skipLocked: true });
  return row ? toQueued(row) : undefined;
}

export async function takeLease(db: Executor, id: string, owner: string, leaseMs: number): Promise<void> {
  await db
    .update(documents)
    .set({
      status: 'processing',
      leaseOwner: owner,
      leaseExpiresAt: sql`now() + make_interval(secs => ${leaseMs / 1000})`,
      attempts: sql`${documents.attempts} + 1`,
      updatedAt: new Date(),
    })
    .where(eq(documents.id, id));
}

/** Extends a lease; false when the work is no longer this worker's (deleted, reprocessed, taken over). */
export async function renewLease(db: Db, id: string, owner: string, generation: number, leaseMs: number): Promise<boolean> {
  const rows = await db
    .update(documents)
    .set({ leaseExpiresAt: sql`now() + make_interval(secs => ${leaseMs / 1000})` })
    .where(and(eq(documents.id, id), eq(documents.leaseOwner, owner), eq(documents.generation, generation), eq(documents.status, 'processing')))
    .returning({ id: documents.id });
  return rows.length > 0;
}

/** Locks the document if this worker still owns its processing; undefined otherwise. */
export async function lockOwned(db: Executor, id: string, owner: string, generation: number): Promise<QueuedDocument | undefined> {
  const [row] = await db
    .select(INFO_COLUMNS)
    .from(documents)
    .where(and(eq(documents.id, id), eq(documents.leaseOwner, owner), eq(documents.generation, generation), eq(documents.status, 'processing')))
    .for('update');
  return row ? toQueued(row) : undefined;
}

/** Bytes of the original per stored part (see `documentParts`). */
const CONTENT_PIECE_BYTES = 1024 * 1024;

/**
 * The original bytes, read a part at a time so no single statement is large, as base64 text:
 * the drivers read a bytea as hex text (a part's hex took 4.3 ms to decode, base64 1.8 ms;
 * Buffer's decoder skips the line breaks `encode` puts every 76 characters).
 */
export async function readContent(db: Executor, id: string): Promise<Uint8Array | undefined> {
  const [row] = await db.select({ size: documents.fileSize }).from(documents).where(eq(documents.id, id));
  if (!row) return undefined;
  const whole = new Uint8Array(row.size);
  let offset = 0;
  for (let part = 0; offset < row.size; part++) {
    const [piece] = await db
      .select({ base64: sql<string>`encode(${documentParts.bytes}, 'base64')` })
      .from(documentParts)
      .where(and(eq(documentParts.documentId, id), eq(documentParts.part, part)));
    if (!piece) return undefined; // deleted meanwhile
    const bytes = Buffer.from(piece.base64, 'base64');
    whole.set(bytes, offset);
    offset += bytes.byteLength;
  }
  return whole;
}

function toInfo(row: InfoRow): DocumentInfo {
  return {
    id: row.id,
    createdAt: row.createdAt.toISOString(),
    characterId: row.characterId,
    name: row.name,
    mimeType: row.mimeType,
    fileSize: row.fileSize,
    status: row.status as DocumentStatus,
    chunkCount: row.chunkCount,
    errorMessage: row.errorMessage,
  };
}

function toQueued(row: InfoRow): QueuedDocument {
  return {
    id: row.id,
    projectId: row.projectId,
    characterId: row.characterId,
    mimeType: row.mimeType,
    status: row.status as DocumentStatus,
    generation: row.generation,
    attempts: row.attempts,
  };
}
