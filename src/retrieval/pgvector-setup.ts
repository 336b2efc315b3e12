import { sql, type SQL } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db, Executor } from '../db/database.ts';

/** Arbitrary constant: serialises this startup DDL when several processes start at once. */
const VECTOR_SETUP_LOCK_KEY = 7_302_118_412;
/** Arbitrary int4: with the dimension, the advisory lock of whoever builds that dimension's vector index. */
const VECTOR_INDEX_LOCK_CLASS = 730_211_842;
/** pgvector's IVFFlat index takes `halfvec` of at most 4,000 dimensions. */
const IVFFLAT_MAX_DIMENSIONS = 4000;
/** Chunks per IVFFlat list when the lists are trained (pgvector's advice: rows / 1,000). */
export const CHUNKS_PER_LIST = 1000;
/** pgvector's bound on an IVFFlat index's lists. */
const IVFFLAT_MAX_LISTS = 32_768;

export const PGVECTOR_MISSING_WARNING =
  'PostgreSQL has no pgvector extension, so documents are searched by full text only. To add vector search, install pgvector ' +
  'on the database server (Debian/Ubuntu with the PGDG repository: apt-get install postgresql-<major>-pgvector; otherwise ' +
  'build it as in https://github.com/pgvector/pgvector#installation, or see .ci/pgvector.sh) and restart Troupe.';

/** Rows from db.execute: postgres.js returns them as an array, PGlite inside `{ rows }`. */
export function rowsOf<T>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/** What prepareVectorSearch found: whether there is an embedding column, and the lists of the vector index (0: none). */
export interface VectorSetup {
  embeddingColumn: boolean;
  lists: number;
}

/**
 * Startup step for vector search.
 *
 * Migration 0002 adds the column only where pgvector was available. If pgvector was installed
 * since, this enables it and adds the column (migrations run once, so they cannot). Then it makes
 * the vector index for the configured dimension if there is none (trainVectorIndex): an index
 * needs a fixed dimension, the column has none, so it is over `embedding::halfvec(N)` for the
 * rows of that dimension.
 */
export async function prepareVectorSearch(db: Db, options: { dimensions: number | undefined; logger: Logger }): Promise<VectorSetup> {
  const { dimensions, logger } = options;
  if (!(await hasEmbeddingColumn(db)) && !(await addEmbeddingColumn(db, logger))) return { embeddingColumn: false, lists: 0 };
  if (dimensions === undefined) return { embeddingColumn: true, lists: 0 };
  if (dimensions > IVFFLAT_MAX_DIMENSIONS) {
    logger.warn({ dimensions }, `EMBEDDINGS_DIMENSIONS is above pgvector's IVFFlat limit (${IVFFLAT_MAX_DIMENSIONS}), so vector search scans every chunk of a character`);
    return { embeddingColumn: true, lists: 0 };
  }
  const lists = (await trainVectorIndex(db, { dimensions, logger, wait: true, onlyMissing: true })) ?? 0;
  return { embeddingColumn: true, lists };
}

/**
 * Makes the IVFFlat index over the chunks of `dimensions`, with lists trained on the chunks there
 * are now, unless the index there has at least half the lists that many chunks call for: lists
 * are trained once per doubling of the chunks, and a new index replaces the old one. Returns the
 * lists of the index in place, or null when another process holds the lock (`wait: false`).
 *
 * Why IVFFlat over halfvec, not HNSW: writing a chunk costs a nearest-centroid lookup and an
 * append to its list, where HNSW's graph insert (~3 ms per chunk at 256 dimensions, 300k chunks)
 * capped filling at ~300 chunks/s; halfvec halves the index, so the lists a search probes stay
 * in shared buffers. The price is this retraining: centroids come from the rows present when
 * the index is built, and an index built on few rows would leave every chunk in a few lists.
 *
 * This is the transactional build, for startup and for PGlite: it holds a SHARE lock (searches
 * go on, chunk writes wait), 8 s for 240 lists over 240k chunks on a loaded 2-core machine,
 * growing with chunks x lists. On a PostgreSQL server the background retraining builds the new
 * index CONCURRENTLY instead, so writes never wait for it (vector-index-rebuild.ts).
 */
export async function trainVectorIndex(
  db: Db,
  options: { dimensions: number; logger: Logger; wait: boolean; onlyMissing?: boolean },
): Promise<number | null> {
  const { dimensions, logger } = options;
  // Without the lock first: a process waiting for it while another builds CONCURRENTLY would
  // hold a snapshot that build waits for (a deadlock PostgreSQL ends by failing one of them).
  const present = options.onlyMissing ? await vectorIndexOf(db, dimensions) : null;
  if (present) return present.lists;
  return db.transaction(async (tx) => {
    if (options.wait) await tx.execute(sql`select pg_advisory_xact_lock(${vectorIndexLock(dimensions)})`);
    else {
      const [lock] = rowsOf<{ locked: boolean }>(await tx.execute(sql`select pg_try_advisory_xact_lock(${vectorIndexLock(dimensions)}) as locked`));
      if (lock?.locked !== true) return null;
    }
    const existing = await vectorIndexOf(tx, dimensions);
    if (existing && options.onlyMissing) return existing.lists;
    // A build over many chunks outlasts the pool's statement timeout; k-means samples 50 rows a list.
    await tx.execute(sql`select set_config('statement_timeout', '0', true), ${buildMemorySetting(true)}`);
    // The lock the build takes anyway, taken before counting: it waits for the writes in flight
    // (the one that asked for this check among them), so the count includes them.
    await tx.execute(sql`lock table document_chunks in share mode`);
    const rows = await chunksOf(tx, dimensions);
    const lists = listsFor(rows);
    if (existing && lists < existing.lists * 2) return existing.lists;
    // What a concurrent build that failed left (invalid, possibly with the name this one takes).
    for (const leftover of await failedBuildsOf(tx, dimensions)) await tx.execute(sql`drop index if exists ${sql.identifier(leftover)}`);
    const started = performance.now();
    await tx.execute(sql`create index if not exists ${sql.identifier(vectorIndexName(dimensions, lists))} ${vectorIndexDefinition(dimensions, lists)}`);
    if (existing) await tx.execute(sql`drop index if exists ${sql.identifier(existing.name)}`);
    logger.info({ dimensions, lists, rows, ms: Math.round(performance.now() - started) }, 'vector index trained');
    return lists;
  });
}

/** The advisory lock (two-int form, one per dimension) held by whoever builds that dimension's index. */
export function vectorIndexLock(dimensions: number): SQL {
  return sql`${VECTOR_INDEX_LOCK_CLASS}::int, ${dimensions}::int`;
}

/** Raises maintenance_work_mem to 256 MB at least, for the transaction (`local`) or the session. */
export function buildMemorySetting(local: boolean): SQL {
  return sql`set_config('maintenance_work_mem', (greatest(pg_size_bytes(current_setting('maintenance_work_mem')), pg_size_bytes('256MB')) / 1024)::text || 'kB', ${local})`;
}

/** The committed chunks of `dimensions`. */
export async function chunksOf(db: Executor, dimensions: number): Promise<number> {
  const [count] = rowsOf<{ rows: number | string }>(await db.execute(sql`select count(*) as rows from document_chunks where embedding_dims = ${sql.raw(String(dimensions))}`));
  return Number(count?.rows ?? 0);
}

/** pgvector's advice, rows / 1,000 lists (or `perList`), within its bounds. */
export function listsFor(rows: number, perList = CHUNKS_PER_LIST): number {
  return Math.min(IVFFLAT_MAX_LISTS, Math.max(1, Math.floor(rows / perList)));
}

export function vectorIndexName(dimensions: number, lists: number): string {
  return `document_chunks_embedding_${dimensions}_ivf${lists}`;
}

/** What an IVFFlat index's lists hold: `halfvec` (2 bytes a number), or `vector` (float32). */
export type VectorElement = 'halfvec' | 'vector';

/** Everything after the index name in CREATE INDEX; searches must order by the same expression. */
export function vectorIndexDefinition(dimensions: number, lists: number, element: VectorElement = 'halfvec'): SQL {
  const [n, type] = [sql.raw(String(dimensions)), sql.raw(element)];
  return sql`on document_chunks using ivfflat ((embedding::${type}(${n})) ${type}_cosine_ops) with (lists = ${sql.raw(String(lists))})
      where embedding_dims = ${n}`;
}

/** Every IVFFlat index for `dimensions`, with whether it is valid (a failed CREATE INDEX CONCURRENTLY leaves one that is not). */
export async function vectorIndexesOf(db: Executor, dimensions: number): Promise<{ name: string; lists: number; valid: boolean }[]> {
  const names = rowsOf<{ name: string; valid: boolean }>(
    await db.execute(sql`select c.relname as name, i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid where i.indrelid = 'document_chunks'::regclass`),
  );
  const pattern = new RegExp(`^document_chunks_embedding_${dimensions}_ivf(\\d+)$`);
  return names.flatMap(({ name, valid }) => {
    const lists = pattern.exec(name)?.[1];
    return lists ? [{ name, lists: Number(lists), valid }] : [];
  });
}

/** The valid IVFFlat index for `dimensions` (named by its lists; the most lists if a replaced one is left), if any. */
export async function vectorIndexOf(db: Executor, dimensions: number): Promise<{ name: string; lists: number } | null> {
  const found = (await vectorIndexesOf(db, dimensions)).filter((index) => index.valid);
  const best = found.sort((a, b) => b.lists - a.lists)[0];
  return best ? { name: best.name, lists: best.lists } : null;
}

/** Names of the invalid indexes for `dimensions`: builds that failed or were cut off. */
export async function failedBuildsOf(db: Executor, dimensions: number): Promise<string[]> {
  return (await vectorIndexesOf(db, dimensions)).filter((index) => !index.valid).map((index) => index.name);
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
