// The background retraining of the vector index on a PostgreSQL server builds CONCURRENTLY:
// chunk writes go on during the build, one process builds at a time, and what a failed build
// leaves is never searched and is dropped. PGlite keeps the transactional build (no own connection).
import { Writable } from 'node:stream';
import { sql } from 'drizzle-orm';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database, Db } from '../../src/db/database.ts';
import { characters, documents, projects } from '../../src/db/schema.ts';
import type { Chunk } from '../../src/documents/chunker.ts';
import { newId } from '../../src/ids.ts';
import { openDocumentIndex, type DocumentIndex } from '../../src/retrieval/document-index.ts';
import { rowsOf, vectorIndexesOf, vectorIndexOf } from '../../src/retrieval/pgvector-setup.ts';
import { ASKING_WRITE_LOCK_CLASS, retrainVectorIndexConcurrently } from '../../src/retrieval/vector-index-rebuild.ts';
import { openDatabaseOn } from '../support/databases.ts';
import { BACKENDS } from '../support/env.ts';

/** The index object is made for 3 dimensions; these tests build the index of 2, which nothing else writes. */
const DIMS = 2;
const INDEXED_DIMS = 3;

function recordingLogger(): { logger: Logger; messages: string[] } {
  const messages: string[] = [];
  const sink = new Writable({
    write(line: Buffer, _encoding, done) {
      messages.push((JSON.parse(line.toString()) as { msg: string }).msg);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), messages };
}

const chunks = (n: number): Chunk[] =>
  Array.from({ length: n }, (_, i) => ({ ordinal: i, content: `entry ${i}`, tokenCount: 2, page: null, headingPath: [], startOffset: i * 10, endOffset: i * 10 + 8 }));
const vectors = (n: number) => Array.from({ length: n }, (_, i) => [Math.cos(i / 50), Math.sin(i / 50)]);

describe.each(BACKENDS)('retraining the vector index on $kind', (backend) => {
  let opened: Awaited<ReturnType<typeof openDatabaseOn>>;
  let database: Database;
  let db: Db;
  let index: DocumentIndex;
  let owner: { projectId: string; characterId: string };

  beforeAll(async () => {
    opened = await openDatabaseOn(backend);
    database = opened.database;
    db = database.db;
    index = await openDocumentIndex({ db, ownConnection: database.ownConnection, logger: pino({ level: 'silent' }), dimensions: INDEXED_DIMS, embeddings: true });
    owner = { projectId: newId('project'), characterId: newId('character') };
    await db.insert(projects).values({ id: owner.projectId, name: 'p' });
    await db.insert(characters).values({ id: owner.characterId, projectId: owner.projectId, name: 'Rook' });
  });
  afterAll(() => opened?.dispose());

  it.runIf(backend.kind === 'pglite')('builds in a transaction on PGlite, which has no connection of its own to build on', () => {
    expect(database.ownConnection).toBeNull();
  });

  const onServer = backend.kind === 'postgres' && backend.vectors;

  /** Writes `n` chunks of DIMS dimensions for a new document, committed. */
  async function write(n: number): Promise<void> {
    const id = newId('document');
    await db.insert(documents).values({ id, ...owner, name: 'notes.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready' });
    await db.transaction((tx) => index.replaceChunks(tx, { id, ...owner }, chunks(n), vectors(n)));
  }

  /** Writes committed chunks of DIMS dimensions until they call for `lists` lists. */
  async function growTo(lists: number): Promise<void> {
    const [row] = rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from document_chunks where embedding_dims = ${DIMS}`));
    await write(lists * 1_000 - (row?.n ?? 0));
  }

  /** A transaction that has written a chunk and stays open until released: a build waits for it. */
  async function openWriter(): Promise<{ release: () => Promise<void> }> {
    const id = newId('document');
    await db.insert(documents).values({ id, ...owner, name: 'open.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready' });
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const transaction = db.transaction(async (tx) => {
      await index.replaceChunks(tx, { id, ...owner }, chunks(1), vectors(1));
      opened();
      await held;
    });
    await open;
    return {
      async release() {
        release();
        await transaction;
      },
    };
  }

  /** Waits until a CREATE INDEX CONCURRENTLY on document_chunks is under way; its backend's pid. */
  async function buildUnderWay(): Promise<number> {
    return vi.waitFor(
      async () => {
        // Past 'initializing': the build shows in the progress view before the transaction that
        // adds its (invalid) index to the catalog commits, and only then does it start waiting.
        const [row] = rowsOf<{ pid: number }>(
          await db.execute(sql`select pid from pg_stat_progress_create_index
            where datname = current_database() and relid = 'document_chunks'::regclass and command = 'CREATE INDEX CONCURRENTLY'
              and phase <> 'initializing'`),
        );
        if (!row) throw new Error('no concurrent build waiting yet');
        return row.pid;
      },
      { timeout: 20_000, interval: 50 },
    );
  }

  const names = async () => (await vectorIndexesOf(db, DIMS)).map(({ name, valid }) => `${name}${valid ? '' : ' (invalid)'}`).sort();

  it.runIf(onServer)('lets chunk writes commit while a build is under way; searches keep the old index until the new one is valid', async () => {
    await write(10);
    const silent = pino({ level: 'silent' });
    expect(await retrainVectorIndexConcurrently(database.ownConnection!, { dimensions: DIMS, logger: silent })).toBe(1);
    await growTo(2);
    const writer = await openWriter();
    const events: string[] = [];
    const build = retrainVectorIndexConcurrently(database.ownConnection!, { dimensions: DIMS, logger: silent }).then((lists) => {
      events.push(`build done: ${lists}`);
    });
    await buildUnderWay();
    // The new index is there, invalid, and searches still take the old one.
    expect(await names()).toEqual(['document_chunks_embedding_2_ivf1', 'document_chunks_embedding_2_ivf2 (invalid)']);
    expect(await vectorIndexOf(db, DIMS)).toEqual({ name: 'document_chunks_embedding_2_ivf1', lists: 1 });
    await write(5);
    events.push('write committed');
    await writer.release();
    await build;
    expect(events).toEqual(['write committed', 'build done: 2']);
    expect(await names()).toEqual(['document_chunks_embedding_2_ivf2']);
  });

  it.runIf(onServer)('counts the chunks of the transaction that asked for a retraining, waiting for it to commit', async () => {
    const id = newId('document');
    await db.insert(documents).values({ id, ...owner, name: 'big.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready' });
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const n = 2_500; // the index of INDEXED_DIMS was made with 1 list on the empty database: these ask for 2
    const transaction = db.transaction(async (tx) => {
      await index.replaceChunks(tx, { id, ...owner }, chunks(n), vectors(n).map(([x, y]) => [x ?? 0, y ?? 0, 1]));
      opened();
      await held;
    });
    await open;
    // The retraining waits for the asking transaction (the lock it took, shared, until it ends), not for the build.
    await vi.waitFor(
      async () => {
        const waiting = rowsOf<{ n: number }>(
          await db.execute(sql`select count(*)::int as n from pg_locks where locktype = 'advisory' and classid = ${ASKING_WRITE_LOCK_CLASS} and objid = ${INDEXED_DIMS} and not granted`),
        );
        expect(waiting[0]?.n).toBe(1);
      },
      { timeout: 20_000, interval: 50 },
    );
    expect(await vectorIndexOf(db, INDEXED_DIMS)).toMatchObject({ lists: 1 });
    release();
    await transaction;
    await vi.waitFor(async () => expect(await vectorIndexesOf(db, INDEXED_DIMS)).toEqual([{ name: 'document_chunks_embedding_3_ivf2', lists: 2, valid: true }]), {
      timeout: 20_000,
      interval: 50,
    });
  });

  it.runIf(onServer)('builds once when two retrainings start together', async () => {
    await growTo(4);
    const { logger, messages } = recordingLogger();
    const writer = await openWriter();
    const first = retrainVectorIndexConcurrently(database.ownConnection!, { dimensions: DIMS, logger });
    await buildUnderWay();
    expect(await retrainVectorIndexConcurrently(database.ownConnection!, { dimensions: DIMS, logger })).toBeNull();
    await writer.release();
    expect(await first).toBe(4);
    expect(messages.filter((msg) => msg === 'vector index trained')).toHaveLength(1);
    expect(await names()).toEqual(['document_chunks_embedding_2_ivf4']);
  });

  it.runIf(onServer)('ignores the invalid index a cut-off build leaves, and the next retraining or start drops it', async () => {
    await growTo(8);
    const silent = pino({ level: 'silent' });
    const writer = await openWriter();
    const cut = retrainVectorIndexConcurrently(database.ownConnection!, { dimensions: DIMS, logger: silent });
    const pid = await buildUnderWay();
    await db.execute(sql`select pg_cancel_backend(${pid})`);
    await expect(cut).rejects.toMatchObject({ cause: { code: '57014' } }); // query_canceled
    await writer.release();
    expect(await names()).toEqual(['document_chunks_embedding_2_ivf4', 'document_chunks_embedding_2_ivf8 (invalid)']);
    expect(await vectorIndexOf(db, DIMS)).toEqual({ name: 'document_chunks_embedding_2_ivf4', lists: 4 });

    // The next retraining drops the leftover and builds.
    expect(await retrainVectorIndexConcurrently(database.ownConnection!, { dimensions: DIMS, logger: silent })).toBe(8);
    expect(await names()).toEqual(['document_chunks_embedding_2_ivf8']);

    // A leftover found at start is dropped there.
    const leftover = 'document_chunks_embedding_2_ivf99';
    const failed = database.ownConnection!((own) => own.execute(sql`create unique index concurrently ${sql.identifier(leftover)} on document_chunks (embedding_dims) where embedding_dims = 2`));
    await expect(failed).rejects.toThrow(/unique|duplicate/i);
    expect(await names()).toContain(`${leftover} (invalid)`);
    await openDocumentIndex({ db, ownConnection: database.ownConnection, logger: silent, dimensions: DIMS, embeddings: true });
    expect(await names()).toEqual(['document_chunks_embedding_2_ivf8']);
  });

  it.runIf(onServer)('tries a failed background retraining again without waiting for more writes', async () => {
    // A fresh index of 4 dimensions (1 list), so this test's writes are what ask for a retraining.
    const dims = 4;
    const { logger, messages } = recordingLogger();
    const retrying = await openDocumentIndex({ db, ownConnection: database.ownConnection, logger, dimensions: dims, embeddings: true, retrainRetryMs: 50 });
    expect(await vectorIndexOf(db, dims)).toMatchObject({ lists: 1 });
    messages.length = 0; // what the writes below set off
    const writer = await openWriter();
    const id = newId('document');
    await db.insert(documents).values({ id, ...owner, name: 'many.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready' });
    await db.transaction((tx) => retrying.replaceChunks(tx, { id, ...owner }, chunks(2_500), vectors(2_500).map(([x, y]) => [x ?? 0, y ?? 0, 1, 1])));
    // The build waits for the open writer; cancelled there, as the deadlock detector cancels one
    // that waits for a VACUUM of the table, it leaves the index at 1 list and an invalid one beside it.
    await db.execute(sql`select pg_cancel_backend(${await buildUnderWay()})`);
    await writer.release();
    // No chunk is written after this: the retraining's own later attempt builds the index.
    await vi.waitFor(async () => expect(await vectorIndexesOf(db, dims)).toEqual([{ name: 'document_chunks_embedding_4_ivf2', lists: 2, valid: true }]), {
      timeout: 20_000,
      interval: 50,
    });
    expect(messages).toContain('could not retrain the vector index; searches still use the old one until a later attempt succeeds');
    expect(messages.filter((msg) => msg === 'vector index trained')).toHaveLength(1);
  });
});
