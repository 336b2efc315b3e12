// Hot statements as named prepared statements. drizzle's `execute` sends every statement
// unnamed, so PostgreSQL parses and plans it on each call: for the full-text read of a search
// over 100 documents that was 0.5-0.7 ms of its 2.5-3 ms (pgbench, simple against prepared).
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Executor } from './database.ts';

const dialect = new PgDialect();

/**
 * `db.execute(query)`, prepared once per connection where the driver prepares (postgres.js on a
 * PostgreSQL server; PGlite runs it as `execute` does). Same result shape as `execute`. Only for
 * statements whose text is fixed, values as parameters: each distinct text stays prepared on
 * each connection for the connection's life.
 */
export function executePrepared(db: Executor, query: SQL): Promise<unknown> {
  // A name makes drizzle's postgres.js session pass `prepare: true`; postgres.js names the statement itself.
  return db._.session.prepareQuery(dialect.sqlToQuery(query), undefined, 'hot', false).execute();
}
