import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
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
