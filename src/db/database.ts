import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PGlite } from '@electric-sql/pglite';
import type { Logger } from 'pino';
import { sql, type ExtractTablesWithRelations } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { insertCopyRows, postgresCopyRows, type CopyRows } from './copy-rows.ts';
import { isInstalledDriverPatched } from './postgres-driver-patch.ts';
import { withQueryDeadlines } from './query-deadline.ts';
import { preparePgliteDataDir } from './pglite-memory.ts';
import { PgliteThreadClient } from './pglite-thread-client.ts';
import type { SpawnWorker } from './pglite-worker-start.ts';
import * as roomSchema from './room-schema.ts';
import * as coreSchema from './schema.ts';

const schema = { ...coreSchema, ...roomSchema };
export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type Tx = PgTransaction<PgQueryResultHKT, Schema, ExtractTablesWithRelations<Schema>>;
/** Repositories accept either the database or an open transaction. */
export type Executor = Db | Tx;

export type Unlisten = () => Promise<void>;

/**
 * Runs `body` on a PostgreSQL connection of its own, outside the pool and any transaction, and
 * closes it when `body` settles (which releases the session's advisory locks, whatever happened).
 * For statements that may not run in a transaction block (CREATE INDEX CONCURRENTLY) and long
 * work that must not take a connection from the requests.
 */
export type OwnConnection = <T>(body: (db: Db) => Promise<T>) => Promise<T>;

export interface Database {
  readonly kind: 'pglite' | 'postgres';
  readonly db: Db;
  /** Throws when the database cannot answer a trivial query. */
  ping(): Promise<void>;
  /**
   * Subscribes to a NOTIFY channel. `onReconnect` runs when the listening connection was lost
   * and re-established, i.e. when notifications may have been missed.
   */
  listen(channel: string, onMessage: (payload: string) => void, onReconnect: () => void): Promise<Unlisten>;
  /** PostgreSQL only; null on PGlite, whose single connection has nothing to gain from one. */
  readonly ownConnection: OwnConnection | null;
  /** Rows with large bytes, outside any transaction, never turned into text here (copy-rows.ts). */
  readonly copyRows: CopyRows;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  poolSize: number;
  /** PostgreSQL only: bounds on opening a connection, waiting for one, and on one statement. */
  connectTimeoutMs?: number;
  acquireTimeoutMs?: number;
  statementTimeoutMs?: number;
  /** PGlite only: where the loss and restart of its worker thread are logged. */
  logger?: Pick<Logger, 'info' | 'error'>;
  /** PGlite only: starts its worker thread; tests pass their own to hold (and kill) the Worker. */
  spawnPglite?: SpawnWorker;
}

const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
/** Arbitrary constant: serialises migrations when several processes start at once. */
const MIGRATION_LOCK_KEY = 7_302_118_411;

/** Opens PostgreSQL (when a URL is given) or embedded PGlite, and applies pending migrations. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  return options.databaseUrl
    ? openPostgres(options.databaseUrl, options.poolSize, {
        connectMs: options.connectTimeoutMs ?? 2_000,
        acquireMs: options.acquireTimeoutMs ?? 2_000,
        statementMs: options.statementTimeoutMs ?? 30_000,
      })
    : openPglite(options.dataDir, options);
}

async function openPglite(dataDir: string, options: Pick<OpenDatabaseOptions, 'logger' | 'spawnPglite'>): Promise<Database> {
  const location = await preparePgliteDataDir(dataDir);
  // PGlite runs in its own thread, so its long statements never stall this one's HTTP server
  // (pglite-worker.ts); drizzle takes the client for the PGlite API it calls.
  const client = await PgliteThreadClient.start(location, {
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.spawnPglite ? { spawn: options.spawnPglite } : {}),
  });
  const drizzled = drizzlePglite({ client: client as unknown as PGlite, schema });
  try {
    await migratePglite(drizzled, { migrationsFolder: MIGRATIONS_FOLDER });
  } catch (err) {
    await client.close();
    throw err;
  }
  const db = drizzled as unknown as Db;
  return {
    kind: 'pglite',
    db,
    async ping() {
      await client.query('select 1');
    },
    async listen(channel, onMessage, onReconnect) {
      // The subscription lives in PGlite's worker thread: one that replaces a dead worker
      // subscribes again, and notifications sent in between were missed.
      return client.listen(channel, onMessage, onReconnect);
    },
    ownConnection: null,
    copyRows: insertCopyRows((text, params) => client.query(text, params)),
    async close() {
      await client.close();
    },
  };
}

interface PostgresTimeouts {
  connectMs: number;
  acquireMs: number;
  statementMs: number;
}

/** How long past statement_timeout a query may go unanswered before its link counts as dead. */
const DEAD_LINK_MARGIN_MS = 2_000;

async function openPostgres(url: string, poolSize: number, timeouts: PostgresTimeouts): Promise<Database> {
  if (!isInstalledDriverPatched()) {
    // The released driver loses pool slots and queries when connections close mid-write.
    throw new Error('postgres.js lacks the fixes in src/db/postgres-driver-patch.ts: run `npm ci`, or `node src/db/postgres-driver-patch.ts`.');
  }
  await runPostgresMigrations(url);
  // While the server is down, requests queue for a connection: a short connect timeout turns
  // that wait into a prompt 503 (database_unavailable) instead of postgres.js' 30 s default.
  const client = postgres(url, {
    max: poolSize,
    onnotice: () => {},
    connect_timeout: timeouts.connectMs / 1000,
    // postgres.js waits up to 20 s between reconnect attempts while queued queries wait with it;
    // retrying within a second keeps every wait during an outage near the connect timeout.
    backoff: (attempt: number) => Math.min(0.1 * attempt, 1),
    connection: { statement_timeout: timeouts.statementMs },
  });
  const bounded = withQueryDeadlines(client, { acquireMs: timeouts.acquireMs, runMs: timeouts.statementMs + DEAD_LINK_MARGIN_MS });
  const db = drizzlePostgres({ client: bounded, schema }) as unknown as Db;
  const own = new Set<postgres.Sql>();
  return {
    kind: 'postgres',
    db,
    async ping() {
      await client`select 1`;
    },
    async listen(channel, onMessage, onReconnect) {
      let first = true;
      const sub = await client.listen(channel, onMessage, () => {
        if (!first) onReconnect();
        first = false;
      });
      return () => sub.unlisten();
    },
    copyRows: postgresCopyRows(bounded),
    async ownConnection(body) {
      // No statement_timeout: what runs here (an index build) may outlast the pool's.
      const connection = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: timeouts.connectMs / 1000 });
      own.add(connection);
      try {
        return await body(drizzlePostgres({ client: connection, schema }) as unknown as Db);
      } finally {
        own.delete(connection);
        await connection.end({ timeout: 5 });
      }
    },
    async close() {
      // A build cut off here leaves an invalid index, which the next retraining drops.
      await Promise.all([client.end({ timeout: 5 }), ...[...own].map((connection) => connection.end({ timeout: 0 }))]);
    },
  };
}

async function runPostgresMigrations(url: string): Promise<void> {
  // One dedicated connection so the advisory lock and the migration share a session.
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await client`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    await migratePostgres(drizzlePostgres({ client, schema }), { migrationsFolder: MIGRATIONS_FOLDER });
    await client`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
  } finally {
    await client.end({ timeout: 5 });
  }
}

/** Sends a NOTIFY inside the caller's transaction, so it is delivered only if that commits. */
export async function notify(executor: Executor, channel: string, payload: string): Promise<void> {
  await executor.execute(sql`select pg_notify(${channel}, ${payload})`);
}
