import { loadConfig } from '../../src/config.ts';

/**
 * What the test run was asked to cover, read through the same loadConfig as the service:
 * DATABASE_URL adds a PostgreSQL pass to every e2e suite, HTTP_ENGINE picks the engine.
 */
const config = loadConfig(process.env);

export type Backend = { kind: 'pglite' } | { kind: 'postgres'; url: string };

export const BACKENDS: Backend[] = [
  { kind: 'pglite' },
  ...(config.databaseUrl ? [{ kind: 'postgres' as const, url: config.databaseUrl }] : []),
];

export const HTTP_ENGINE = config.httpEngine;
export const POSTGRES_URL = config.databaseUrl;
/** Set (CI sets it) to run the multi-process suites on the real Redis. */
export const REDIS_URL = config.redisUrl;
