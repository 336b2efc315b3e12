import { performance } from 'node:perf_hooks';
import { drizzle } from 'drizzle-orm/postgres-js';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withQueryDeadlines } from '../../src/db/query-deadline.ts';
import { unavailable } from '../../src/errors.ts';
import { createTempDatabase } from '../support/databases.ts';
import { POSTGRES_URL } from '../support/env.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';

/** A bound on a wait that must not hang, with room for a loaded machine; not a speed target. */
const PROMPTLY_MS = 3_000;
const ACQUIRE_MS = 300;
const RUN_MS = 400;

/**
 * postgres.js alone has no acquire timeout: with its connection attempts hanging, each attempt
 * fails only the query that started it, so ten queries on a one-connection pool with a 5 s
 * connect timeout take 50 s to fail. Through withQueryDeadlines every one fails in ACQUIRE_MS.
 * PostgreSQL only: PGlite has no pool or network to wait on. CI sets DATABASE_URL in both legs.
 */
describe.skipIf(!POSTGRES_URL)('database query deadlines', () => {
  let proxy: FaultProxy;
  let url: string;
  let drop: () => Promise<void>;
  let client: postgres.Sql;

  beforeAll(async () => {
    const temp = await createTempDatabase(POSTGRES_URL as string);
    drop = temp.drop;
    const u = new URL(temp.url);
    proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    url = proxy.via(temp.url);
    client = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
    await client`create table marks (label text not null)`;
  });
  afterAll(async () => {
    await proxy?.restore();
    await client?.end({ timeout: 1 });
    await proxy?.close();
    await drop?.();
  });

  const bounded = () => drizzle({ client: withQueryDeadlines(client, { acquireMs: ACQUIRE_MS, runMs: RUN_MS }) });
  const failure = async (work: Promise<unknown>) => {
    const started = performance.now();
    const err = await work.then(
      () => null,
      (e: unknown) => e,
    );
    return { err, ms: performance.now() - started };
  };

  it('fails every query queued for a connection within the acquire timeout, as database_unavailable', async () => {
    await proxy.cut('blackhole');
    await client.end({ timeout: 0 }).catch(() => {});
    client = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
    const db = bounded();
    try {
      const results = await Promise.all(Array.from({ length: 10 }, () => failure(db.execute(sql`select 1`))));
      for (const { err, ms } of results) {
        expect(unavailable(err)?.code).toBe('database_unavailable');
        expect(ms).toBeLessThan(PROMPTLY_MS);
      }
    } finally {
      await proxy.restore();
    }
    // The pool answers again once its hanging connection attempt gives up.
    await expect(client`select 1 as one`).resolves.toEqual([{ one: 1 }]);
  });

  it('never runs a transaction whose caller was told the database is unavailable', async () => {
    await proxy.cut('blackhole');
    await client.end({ timeout: 0 }).catch(() => {});
    client = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
    let bodyRan = false;
    const tx = bounded().transaction(async (t) => {
      bodyRan = true;
      await t.execute(sql`insert into marks (label) values ('late')`);
    });
    const { err, ms } = await failure(tx);
    expect(unavailable(err)?.code).toBe('database_unavailable');
    expect(ms).toBeLessThan(PROMPTLY_MS);
    await proxy.restore();
    // The pool's pending BEGIN gets its connection now; the body must not run.
    await client`select 1`;
    const rows = await client`select label from marks`;
    expect(rows).toHaveLength(0);
    expect(bodyRan).toBe(false);
  });

  it('fails a query whose connection went silent, instead of waiting for TCP to give up', async () => {
    const db = bounded();
    await db.execute(sql`select 1`);
    await proxy.cut('freeze');
    try {
      const { err, ms } = await failure(db.execute(sql`select 2`));
      expect(unavailable(err)?.code).toBe('database_unavailable');
      expect(ms).toBeLessThan(PROMPTLY_MS);

      const { err: txErr, ms: txMs } = await failure(db.transaction(async (t) => t.execute(sql`insert into marks (label) values ('frozen')`)));
      expect(unavailable(txErr)?.code).toBe('database_unavailable');
      expect(txMs).toBeLessThan(PROMPTLY_MS);
    } finally {
      await proxy.restore();
    }
  });
});
