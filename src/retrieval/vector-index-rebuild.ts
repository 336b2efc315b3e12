// The background retraining of the vector index on a PostgreSQL server. The transactional build
// (trainVectorIndex) holds a SHARE lock, so chunk writes waited for all of it (8 s at 240k
// chunks); this one runs CREATE INDEX CONCURRENTLY on a connection of its own, and writes go on.
// Either build, when it fails, is tried again later (retrainWithRetries).
import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db, Executor, OwnConnection } from '../db/database.ts';
import {
  buildMemorySetting,
  chunksOf,
  failedBuildsOf,
  listsFor,
  rowsOf,
  vectorIndexDefinition,
  vectorIndexesOf,
  vectorIndexLock,
  vectorIndexName,
  vectorIndexOf,
} from './pgvector-setup.ts';

/** Arbitrary int4: with the dimension, held shared by a write that asked for a retraining until its transaction ends. */
export const ASKING_WRITE_LOCK_CLASS = 730_211_843;
/** That advisory lock's two-int key for `dimensions`. */
const askingWriteLock = (dimensions: number) => sql`${ASKING_WRITE_LOCK_CLASS}::int, ${dimensions}::int`;

/**
 * Runs inside the transaction of the write that asks for a retraining, so the retraining can
 * wait for it to end and count its chunks. A try: when it is not granted, a retraining is
 * counting already, and the write must not wait for it.
 */
export async function markAskingWrite(tx: Executor, dimensions: number): Promise<void> {
  await tx.execute(sql`select pg_try_advisory_xact_lock_shared(${askingWriteLock(dimensions)})`);
}

/**
 * trainVectorIndex's background retraining, built CONCURRENTLY: writes and searches go on, and
 * searches use the old index until the new one is valid; then the old one is dropped
 * CONCURRENTLY. Returns the lists of the index in place, or null when another process is
 * building (one builds at a time: a session advisory lock on the build's own connection,
 * released when it closes, whatever happened).
 *
 * The build waits for every transaction that writes chunks or holds an older snapshot; no
 * transaction of this process waits for the build in turn (nothing awaits it, and it runs on a
 * connection outside the pool, so it takes none from them), so it always ends. A build that
 * fails or is cut off leaves an invalid index, which searches never use (vectorIndexOf) and the
 * next retraining, or the next start, drops.
 */
export async function retrainVectorIndexConcurrently(own: OwnConnection, options: { dimensions: number; logger: Logger }): Promise<number | null> {
  const { dimensions, logger } = options;
  return own(async (db) => {
    const [lock] = rowsOf<{ locked: boolean }>(await db.execute(sql`select pg_try_advisory_lock(${vectorIndexLock(dimensions)}) as locked`));
    if (lock?.locked !== true) return null;
    // For this connection only, which closes after: a build outlasts the pool's statement timeout.
    await db.execute(sql`select set_config('statement_timeout', '0', false), ${buildMemorySetting(false)}`);
    await dropLeftovers(db, dimensions, logger);
    // Waits for the write that asked for this to end (not for any other), so the count includes it.
    await db.execute(sql`select pg_advisory_lock(${askingWriteLock(dimensions)})`);
    await db.execute(sql`select pg_advisory_unlock(${askingWriteLock(dimensions)})`);
    const existing = await vectorIndexOf(db, dimensions);
    const rows = await chunksOf(db, dimensions);
    const lists = listsFor(rows);
    if (existing && lists < existing.lists * 2) return existing.lists;
    const name = vectorIndexName(dimensions, lists);
    const started = performance.now();
    await db.execute(sql`create index concurrently if not exists ${sql.identifier(name)} ${vectorIndexDefinition(dimensions, lists)}`);
    // The old index, and one a build cut off before this drop left valid beside its successor.
    for (const old of await vectorIndexesOf(db, dimensions)) {
      if (old.name !== name) await db.execute(sql`drop index concurrently if exists ${sql.identifier(old.name)}`);
    }
    logger.info({ dimensions, lists, rows, ms: Math.round(performance.now() - started) }, 'vector index trained');
    return lists;
  });
}

/**
 * Startup: drops what a build that failed or was cut off left, unless a process is building
 * (its index is invalid until done). Writes keep maintaining such an index until it is dropped.
 */
export async function dropFailedBuilds(db: Db, own: OwnConnection, options: { dimensions: number; logger: Logger }): Promise<void> {
  const { dimensions, logger } = options;
  if ((await failedBuildsOf(db, dimensions)).length === 0) return;
  await own(async (session) => {
    const [lock] = rowsOf<{ locked: boolean }>(await session.execute(sql`select pg_try_advisory_lock(${vectorIndexLock(dimensions)}) as locked`));
    if (lock?.locked === true) await dropLeftovers(session, dimensions, logger);
  });
}

/** Drops the invalid indexes of `dimensions`; the caller holds the build lock. */
async function dropLeftovers(db: Db, dimensions: number, logger: Logger): Promise<void> {
  for (const name of await failedBuildsOf(db, dimensions)) {
    await db.execute(sql`drop index concurrently if exists ${sql.identifier(name)}`);
    logger.warn({ dimensions, index: name }, 'dropped a vector index a failed or interrupted build left');
  }
}

/** Attempts after the first when a background retraining fails, each after twice the wait before. */
const RETRAIN_RETRIES = 4;
/** The wait before the first of them [RETRAIN_RETRY_MS]. */
export const RETRAIN_RETRY_MS = 30_000;

/**
 * Runs a background retraining, and runs it again later when it fails: a build the deadlock
 * detector cancelled (a VACUUM of the table while the build waits), or one an operator cancelled,
 * leaves the index with the lists it had, and otherwise only more chunk writes would retrain it.
 * The failed build's invalid index is dropped by the next attempt. Rejects with the last failure.
 */
export async function retrainWithRetries<T>(run: () => Promise<T>, options: { retryMs: number; logger: Logger }): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= RETRAIN_RETRIES) throw err;
      const retryInMs = options.retryMs * 2 ** attempt;
      options.logger.warn({ err, retryInMs }, 'could not retrain the vector index; searches still use the old one until a later attempt succeeds');
      // Unreferenced: a pending attempt does not keep a stopping process alive.
      await delay(retryInMs, undefined, { ref: false });
    }
  }
}
