import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { openDatabase, type Database } from '../../src/db/database.ts';
import type { Backend } from './env.ts';
import { trackDatabase } from './leftovers.ts';

/** A fresh PostgreSQL database per suite, so suites run in parallel without seeing each other. */
export async function createTempDatabase(baseUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `troupe_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: trackDatabase(name, async () => {
      const client = postgres(baseUrl, { max: 1, onnotice: () => {} });
      try {
        await client.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    }),
  };
}

/** Troupe's database on a backend, migrated: PGlite in memory, or a fresh PostgreSQL database dropped on dispose. */
export async function openDatabaseOn(backend: Backend): Promise<{ database: Database; dispose: () => Promise<void> }> {
  if (backend.kind === 'pglite') {
    const database = await openDatabase({ databaseUrl: undefined, dataDir: 'memory://', poolSize: 1 });
    return { database, dispose: () => database.close() };
  }
  const temp = await createTempDatabase(backend.url);
  const database = await openDatabase({ databaseUrl: temp.url, dataDir: 'memory://', poolSize: 4 });
  return {
    database,
    async dispose() {
      await database.close();
      await temp.drop();
    },
  };
}
