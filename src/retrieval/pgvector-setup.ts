import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db } from '../db/database.ts';

/** Arbitrary constant: serialises this startup DDL when several processes start at once. */
const VECTOR_SETUP_LOCK_KEY = 7_302_118_412;
/** pgvector's HNSW index takes `vector` columns of at most 2,000 dimensions. */
const HNSW_MAX_DIMENSIONS = 2000;

export const PGVECTOR_MISSING_WARNING =
  'PostgreSQL has no pgvector extension, so documents are searched by full text only. To add vector search, install pgvector ' +
  'on the database server (Debian/Ubuntu with the PGDG repository: apt-get install postgresql-<major>-pgvector; otherwise ' +
  'build it as in https://github.com/pgvector/pgvector#installation, or see .ci/pgvector.sh) and restart Troupe.';

/** Rows from db.execute: postgres.js returns them as an array, PGlite inside `{ rows }`. */
export function rowsOf<T>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/**
 * Startup step for vector search; returns whether `document_chunks.embedding` exists.
 *
 * Migration 0002 adds the column only where pgvector was available. If pgvector was installed
 * since, this enables it and adds the column (migrations run once, so they cannot). Then it makes
 * the HNSW index for the configured dimension: HNSW needs a fixed dimension, the column has
 * none, so the index is over `embedding::vector(N)` for the rows of that dimension.
 */
export async function prepareVectorSearch(db: Db, options: { dimensions: number | undefined; logger: Logger }): Promise<boolean> {
  const { dimensions, logger } = options;
  if (!(await hasEmbeddingColumn(db)) && !(await addEmbeddingColumn(db, logger))) return false;
  if (dimensions === undefined) return true;
  if (dimensions > HNSW_MAX_DIMENSIONS) {
    logger.warn({ dimensions }, `EMBEDDINGS_DIMENSIONS is above pgvector's HNSW limit (${HNSW_MAX_DIMENSIONS}), so vector search scans every chunk of a character`);
    return true;
  }
  const n = sql.raw(String(dimensions));
  await db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${VECTOR_SETUP_LOCK_KEY})`);
    await tx.execute(sql`
      create index if not exists ${sql.identifier(`document_chunks_embedding_${dimensions}_idx`)}
      on document_chunks using hnsw ((embedding::vector(${n})) vector_cosine_ops)
      where embedding_dims = ${n}`);
  });
  return true;
}

async function hasEmbeddingColumn(db: Db): Promise<boolean> {
  const rows = rowsOf<{ present: boolean }>(
    await db.execute(sql`
      select exists (
        select 1 from pg_attribute
        where attrelid = 'document_chunks'::regclass and attname = 'embedding' and not attisdropped
      ) as present`),
  );
  return rows[0]?.present === true;
}

/** False, with a warning that says what to do, when there is no pgvector or it may not be enabled. */
async function addEmbeddingColumn(db: Db, logger: Logger): Promise<boolean> {
  const available = rowsOf<{ name: string }>(await db.execute(sql`select name from pg_available_extensions where name = 'vector'`));
  if (available.length === 0) {
    logger.warn(PGVECTOR_MISSING_WARNING);
    return false;
  }
  try {
    await db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(${VECTOR_SETUP_LOCK_KEY})`);
      await tx.execute(sql`create extension if not exists vector`);
      await tx.execute(sql`alter table document_chunks add column if not exists embedding vector`);
    });
  } catch (err) {
    logger.warn({ err }, 'pgvector is installed but could not be enabled, so documents are searched by full text only; a superuser can run: create extension vector');
    return false;
  }
  logger.info('pgvector found: document chunks can now be searched by vector');
  return true;
}
