// PGlite runs in its own worker thread (src/db/pglite-worker.ts): a long statement keeps that
// thread busy, never the HTTP server's, and the thread client behaves as PGlite itself did for
// drizzle (transactions, PostgreSQL's error fields, NOTIFY, type parsing).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import type { PGlite } from '@electric-sql/pglite';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Invalidations } from '../../src/cache/invalidations.ts';
import { openDatabase } from '../../src/db/database.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { characters, documents, projects } from '../../src/db/schema.ts';
import { DocumentProcessor } from '../../src/documents/processor.ts';
import { contentPieces, finishUpload, insertUploading, storePart } from '../../src/documents/repository.ts';
import { newId } from '../../src/ids.ts';
import { openDocumentIndex } from '../../src/retrieval/document-index.ts';
import { Embedder } from '../../src/retrieval/embeddings.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { ParserPool } from '../../workers/parser-pool.ts';
import { preparePgliteDataDir } from '../../src/db/pglite-memory.ts';
import { PgliteThreadClient } from '../../src/db/pglite-thread-client.ts';
import { restartDelayMs } from '../../src/db/pglite-worker-start.ts';
import { toErrorBody } from '../../src/errors.ts';
import { BACKENDS } from '../support/env.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

/** Long enough that a main thread running it could not answer anything meanwhile. */
const LONG_STATEMENT_S = 4;

describe.each(BACKENDS)('the server on $kind during a long statement', (backend) => {
  let troupe: TestServer;
  beforeAll(async () => {
    troupe = await startTestServer(backend);
  });
  afterAll(() => troupe?.close());

  it('answers GET /healthz and keeps its event loop turning until the statement ends', async () => {
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    let statementDone = false;
    const statement = troupe.server.resources.database.db.execute(sql`select pg_sleep(${LONG_STATEMENT_S})`).then(() => {
      statementDone = true;
    });
    const answeredDuringStatement: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${troupe.url}/healthz`);
      expect(res.status).toBe(200);
      answeredDuringStatement.push(!statementDone);
    }
    await statement;
    loop.disable();
    // Ordering, not timing: on the main thread PGlite answered nothing before pg_sleep returned.
    expect(answeredDuringStatement).toEqual([true, true, true]);
    // Generous for a shared machine; a main-thread PGlite stalls for the whole statement.
    expect(loop.max / 1e6).toBeLessThan((LONG_STATEMENT_S * 1000) / 2);
  });
});

describe('PGlite in a worker thread', () => {
  let client: PgliteThreadClient;
  beforeAll(async () => {
    client = await PgliteThreadClient.start('memory://');
    await client.exec('create table items (id int primary key, name text not null unique, at timestamptz default now(), big int8, data bytea)');
  });
  afterAll(() => client?.close());

  it('commits a transaction, rolls one back, and holds other statements until it ends', async () => {
    await client.transaction(async (tx) => {
      await tx.query('insert into items (id, name) values ($1, $2)', [1, 'kept']);
    });
    await expect(
      client.transaction(async (tx) => {
        await tx.query('insert into items (id, name) values ($1, $2)', [2, 'dropped']);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');

    const events: string[] = [];
    let outside: Promise<unknown> | undefined;
    await client.transaction(async (tx) => {
      await tx.query('insert into items (id, name) values ($1, $2)', [3, 'late']);
      outside = client.query<{ n: number }>('select count(*)::int as n from items').then((r) => events.push(`outside saw ${r.rows[0]?.n}`));
      // A round trip inside the transaction: the outside statement has reached the worker by now.
      await tx.query('select 1');
      events.push('committing');
    });
    await outside;
    expect(events).toEqual(['committing', 'outside saw 2']);
    const names = await client.query<{ name: string }>('select name from items order by id');
    expect(names.rows.map((r) => r.name)).toEqual(['kept', 'late']);
  });

  it("carries PostgreSQL's error fields through drizzle, so unique violations map as before", async () => {
    const db = drizzle({ client: client as unknown as PGlite });
    const failure: unknown = await db.execute(sql`insert into items (id, name) values (10, 'kept')`).catch((err: unknown) => err);
    expect(isUniqueViolation(failure)).toBe(true);
    expect((failure as { cause?: { constraint?: string; detail?: string } }).cause).toMatchObject({ code: '23505', constraint: 'items_name_key', detail: expect.stringContaining('kept') });
    // The failed statement rolled back its own transaction only.
    expect((await client.query('select 1 as ok')).rows).toEqual([{ ok: 1 }]);
  });

  it("parses values as PGlite does, except the types drizzle keeps as text", async () => {
    const bytes = new Uint8Array(200_000).map((_, i) => i % 251); // large enough to be transferred
    await client.query('insert into items (id, name, big, data) values (20, $1, $2, $3)', ['bytes', 9_007_199_254_740_993n, bytes]);
    const db = drizzle({ client: client as unknown as PGlite });
    const result = (await db.execute(sql`select at, big, data from items where id = 20`)) as unknown as { rows: { at: unknown; big: unknown; data: Uint8Array }[] };
    const row = result.rows[0];
    expect(typeof row?.at).toBe('string');
    expect(row?.big).toBe(9_007_199_254_740_993n);
    expect(row?.data).toEqual(bytes);
    const small = await client.query<{ empty: Uint8Array; few: Uint8Array }>("select ''::bytea as empty, '\\x00ff10'::bytea as few");
    expect(small.rows[0]).toEqual({ empty: new Uint8Array(0), few: new Uint8Array([0, 255, 16]) });
  });

  it('delivers NOTIFY to listeners until they unlisten', async () => {
    const got: string[] = [];
    let notified!: () => void;
    const first = new Promise<void>((resolve) => (notified = resolve));
    const unlisten = await client.listen('pglite_thread', (payload) => {
      got.push(payload);
      notified();
    });
    await client.query("select pg_notify('pglite_thread', 'one')");
    await first;
    await unlisten();
    await client.query("select pg_notify('pglite_thread', 'two')");
    await client.query('select 1'); // a notification sent before this answer would have arrived already
    expect(got).toEqual(['one']);
  });
});

describe('a PGlite worker thread that dies', () => {
  const WORKER = new URL('../../src/db/pglite-worker.ts', import.meta.url);

  /** The client's log lines, and a promise for the n-th line with a message. */
  function recordingLogger() {
    const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
    const waiting: { msg: string; n: number; resolve: () => void }[] = [];
    const count = (msg: string) => lines.filter((line) => line.msg === msg).length;
    const log = (level: string) => (fields: Record<string, unknown>, msg: string) => {
      lines.push({ level, msg, fields });
      for (const w of waiting.filter((w) => count(w.msg) >= w.n)) w.resolve();
    };
    const logger = { info: log('info'), error: log('error') } as unknown as Pick<Logger, 'info' | 'error'>;
    const nth = (msg: string, n: number) => new Promise<void>((resolve) => (count(msg) >= n ? resolve() : waiting.push({ msg, n, resolve })));
    return { logger, lines, nth };
  }

  it('fails what was in flight with a 503 error, then a new worker on the same data directory answers with the data', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-pglite-restart-'));
    const workers: Worker[] = [];
    const log = recordingLogger();
    const client = await PgliteThreadClient.start(await preparePgliteDataDir(dir), {
      logger: log.logger,
      spawn: (workerData) => {
        workers.push(new Worker(WORKER, { workerData }));
        return workers[workers.length - 1] as Worker;
      },
    });
    try {
      await client.exec('create table kept (id int primary key, name text not null)');
      await client.query('insert into kept values (1, $1)', ['before the crash']);
      let listening!: () => void;
      const listensAgain = new Promise<void>((resolve) => (listening = resolve));
      let heard!: (payload: string) => void;
      const notified = new Promise<string>((resolve) => (heard = resolve));
      await client.listen('restart_test', (payload) => heard(payload), () => listening());

      // A transaction holding the worker, and a statement waiting behind it, when the worker dies.
      let opened!: () => void;
      const open = new Promise<void>((resolve) => (opened = resolve));
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const transaction = client.transaction(async (tx) => {
        await tx.query('insert into kept values (2, $1)', ['in a transaction that dies']);
        opened();
        await held;
        await tx.query('select 1');
      });
      await open;
      const running = client.query('select count(*) from kept');
      await workers[0]?.terminate();

      const failure: unknown = await running.catch((err: unknown) => err);
      expect(failure).toMatchObject({ code: 'CONNECTION_CLOSED', message: expect.stringContaining('a new one is starting') });
      expect(toErrorBody(failure, 'req_test')).toMatchObject({ status: 503, headers: { 'retry-after': '2' }, body: { error: { code: 'database_unavailable' } } });
      release();
      await expect(transaction).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });

      await log.nth("PGlite's worker thread restarted", 1);
      await listensAgain;
      expect(workers).toHaveLength(2);
      expect((await client.query('select id, name from kept order by id')).rows).toEqual([{ id: 1, name: 'before the crash' }]);
      await client.query("select pg_notify('restart_test', 'after the restart')");
      expect(await notified).toBe('after the restart');

      // A worker that dies soon after the last one is replaced after a pause, not at once.
      await workers[1]?.terminate();
      await log.nth("PGlite's worker thread restarted", 2);
      const deaths = log.lines.filter((line) => line.level === 'error').map((line) => line.fields);
      expect(deaths).toMatchObject([
        { attempt: 1, restartInMs: 0 },
        { attempt: 2, restartInMs: restartDelayMs(2) },
      ]);
      expect(restartDelayMs(2)).toBeGreaterThan(0);
      expect((await client.query('select count(*)::int as n from kept')).rows).toEqual([{ n: 1 }]);
    } finally {
      await client.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('requeues a document whose processing the death interrupted, which then ends ready, not failed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-pglite-processing-'));
    const workers: Worker[] = [];
    const log = recordingLogger();
    let killOnChunkWrite = true;
    const database = await openDatabase({
      databaseUrl: undefined,
      dataDir: dir,
      poolSize: 1,
      logger: log.logger,
      spawnPglite: (workerData) => {
        const worker = new Worker(WORKER, { workerData });
        workers.push(worker);
        // The first worker dies as the processor sends its first chunk write: mid-processing, by construction.
        const post = worker.postMessage.bind(worker);
        worker.postMessage = (message: unknown) => {
          if (killOnChunkWrite && String((message as { sql?: unknown }).sql).includes('insert into document_chunks')) {
            killOnChunkWrite = false;
            void worker.terminate();
            return;
          }
          post(message);
        };
        return worker;
      },
    });
    const logger = pino({ level: 'silent' });
    const invalidations = new Invalidations(database);
    const pool = new ParserPool({ maxThreads: 1, maxMemoryMb: 256, timeoutMs: 30_000, limits: { maxPages: 100, maxPixels: 1e8, maxUncompressedBytes: 1e8, maxZipEntries: 100, maxTextChars: 1e6 } });
    const index = await openDocumentIndex({ db: database.db, ownConnection: database.ownConnection, logger, dimensions: undefined, embeddings: false });
    const processor = new DocumentProcessor({
      database,
      invalidations,
      pool,
      embedder: new Embedder({ baseUrl: undefined, apiKey: undefined, model: undefined, dimensions: undefined, batchSize: 64 }, logger),
      index,
      logger,
      options: { concurrency: 1, leaseMs: 30_000, pollMs: 60_000, maxAttempts: 3, chunking: { maxTokens: 64, overlapTokens: 8 } },
    });
    try {
      await invalidations.start();
      const projectId = newId('project');
      const characterId = newId('character');
      await database.db.insert(projects).values({ id: projectId, name: 'p' });
      await database.db.insert(characters).values({ id: characterId, projectId, name: 'Rook' });
      const text = new TextEncoder().encode('The harbour master hates pirates and keeps a cannon by the pier. '.repeat(40));
      const id = await insertUploading(database.db, { projectId, characterId, name: 'harbour.txt', mimeType: 'text/plain', fileSize: text.byteLength });
      let part = 0;
      for (const piece of contentPieces(text)) await storePart(database, id, part++, piece);
      await finishUpload(database.db, id);

      await processor.start();
      const status = async () => {
        const [row] = rowsOf<{ status: string; attempts: number; chunk_count: number; error_message: string | null; chunks: number }>(
          await database.db.execute(sql`select status, attempts, chunk_count, error_message, (select count(*)::int from document_chunks where document_id = ${id}) as chunks
            from ${documents} where id = ${id}`),
        );
        return row;
      };
      const final = await vi.waitFor(
        async () => {
          const row = await status().catch(() => undefined); // the database may be restarting
          if (row?.status !== 'ready' && row?.status !== 'failed') throw new Error(`still ${row?.status}`);
          return row;
        },
        { timeout: 30_000, interval: 50 },
      );
      expect(workers).toHaveLength(2);
      expect(killOnChunkWrite).toBe(false);
      expect(final).toMatchObject({ status: 'ready', attempts: 2, error_message: null });
      expect(final.chunks).toBe(final.chunk_count);
      expect(final.chunk_count).toBeGreaterThan(1);
    } finally {
      await processor.stop();
      await invalidations.stop();
      await pool.close();
      await database.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('backs off further for each worker in a row that dies, up to a limit', () => {
    const delays = [1, 2, 3, 4, 5, 20].map(restartDelayMs);
    expect(delays.slice(0, 5)).toEqual([0, 500, 1_000, 2_000, 4_000]);
    expect(delays[5]).toBe(30_000);
  });

  it('does not restart an in-memory database, whose data died with the worker', async () => {
    let worker: Worker | undefined;
    const client = await PgliteThreadClient.start('memory://', {
      spawn: (workerData) => {
        worker = new Worker(WORKER, { workerData });
        return worker;
      },
    });
    const pending = client.query(`select pg_sleep(${LONG_STATEMENT_S})`);
    await worker?.terminate();
    await expect(pending).rejects.toMatchObject({ code: 'CONNECTION_CLOSED', message: expect.stringContaining("PGlite's worker thread stopped") });
    await expect(client.query('select 1')).rejects.toMatchObject({ code: 'CONNECTION_CLOSED', message: expect.stringContaining('restart Troupe') });
  });
});
