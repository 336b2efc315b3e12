import postgres from 'postgres';
import { loadConfig } from '../../src/config.ts';

/**
 * What the test run was asked to cover, read through the same loadConfig as the service:
 * DATABASE_URL adds a PostgreSQL pass to every e2e suite, HTTP_ENGINE picks the engine.
 */
const config = loadConfig(process.env);

/**
 * `vectors`: the server can load pgvector, so document search is hybrid (full text + vectors);
 * without it Troupe searches by full text only, and the document suites assert that instead.
 * PGlite always ships the extension.
 */
export type Backend = { kind: 'pglite'; vectors: true } | { kind: 'postgres'; url: string; vectors: boolean };

async function hasPgvector(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`select 1 from pg_available_extensions where name = 'vector'`;
    return rows.length > 0;
  } finally {
    await sql.end();
  }
}

export const BACKENDS: Backend[] = [
  { kind: 'pglite', vectors: true },
  ...(config.databaseUrl ? [{ kind: 'postgres' as const, url: config.databaseUrl, vectors: await hasPgvector(config.databaseUrl) }] : []),
];

export const HTTP_ENGINE = config.httpEngine;
export const POSTGRES_URL = config.databaseUrl;
/** Set (CI sets it) to run the multi-process suites on the real Redis. */
export const REDIS_URL = config.redisUrl;
