import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { eq, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { migrate } from 'drizzle-orm/pglite/migrator';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/database.ts';
import * as schema from '../../src/db/schema.ts';
import { characters, documents, projects } from '../../src/db/schema.ts';
import type { Chunk } from '../../src/documents/chunker.ts';
import { PackedChunks } from '../../src/documents/packed-chunks.ts';
import { newId } from '../../src/ids.ts';
import { openDocumentIndex, type DocumentIndex } from '../../src/retrieval/document-index.ts';
import { PGVECTOR_MISSING_WARNING, rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { openDatabaseOn } from '../support/databases.ts';
import { BACKENDS } from '../support/env.ts';
import { seeded } from '../support/vectors.ts';

const MIGRATIONS = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../src/db/migrations');
const DIMS = 3;

/** A logger whose lines the test can read. */
function recordingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

function chunk(ordinal: number, content: string): Chunk {
  return { ordinal, content, tokenCount: Math.ceil(content.length / 4), page: ordinal + 1, headingPath: ['Harbour'], startOffset: ordinal * 100, endOffset: ordinal * 100 + content.length };
}

interface Owner {
  projectId: string;
  characterId: string;
}

async function newOwner(db: Db): Promise<Owner> {
  const projectId = newId('project');
  const characterId = newId('character');
  await db.insert(projects).values({ id: projectId, name: 'p' });
  await db.insert(characters).values({ id: characterId, projectId, name: 'Rook' });
  return { projectId, characterId };
}

async function newDocument(db: Db, owner: Owner, status = 'ready'): Promise<{ id: string } & Owner> {
  const id = newId('document');
  await db.insert(documents).values({ id, ...owner, name: 'notes.txt', mimeType: 'text/plain', fileSize: 1, status });
  return { id, ...owner };
}

async function chunkCount(db: Db, documentId: string): Promise<number> {
  const rows = rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from document_chunks where document_id = ${documentId}`));
  return rows[0]?.n ?? -1;
}

const HARBOUR = chunk(0, 'The harbour master hates pirates and keeps a cannon by the pier.');
const TIDES = chunk(1, 'Tides rise at dawn; fishing boats leave before the bell.');
const TAVERN = chunk(2, 'The tavern serves fish stew to sailors every evening.');
const VECTORS = [
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
];

describe.each(BACKENDS)('the document index on $kind', (backend) => {
  let opened: Awaited<ReturnType<typeof openDatabaseOn>>;
  let db: Db;
  let index: DocumentIndex;

  beforeAll(async () => {
    opened = await openDatabaseOn(backend);
    db = opened.database.db;
    // On PostgreSQL retrainings build CONCURRENTLY on a connection of their own (vector-index-rebuild.test.ts).
    index = await openDocumentIndex({ db, ownConnection: opened.database.ownConnection, logger: pino({ level: 'silent' }), dimensions: DIMS, embeddings: true });
  });
  afterAll(async () => {
    await opened.dispose();
  });

  // Without pgvector on the server, the same index searches by full text only.
  const embeddings = () => (backend.vectors ? VECTORS : null);

  it('has vector search, with an IVFFlat index for the configured dimension, exactly when the server has pgvector', async () => {
    expect(index.vectors).toBe(backend.vectors);
    const indexes = rowsOf<{ indexdef: string }>(await db.execute(sql`select indexdef from pg_indexes where indexname like ${`document_chunks_embedding_${DIMS}_ivf%`}`));
    if (!backend.vectors) {
      expect(indexes).toEqual([]);
      return;
    }
    expect(indexes).toHaveLength(1);
    expect(indexes[0]?.indexdef).toMatch(/USING ivfflat .*halfvec_cosine_ops.*WHERE \(embedding_dims = 3\)/);
    // Opening again (another process, a restart) finds the index in place.
    await openDocumentIndex({ db, logger: pino({ level: 'silent' }), dimensions: DIMS, embeddings: true });
  });

  it('finds the right chunk by words and by vector, with its document, page and headings', async () => {
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES, TAVERN], embeddings()));

    const byWords = await index.search({ ...owner, text: 'When do the tides rise?', embedding: null, limit: 3 });
    expect(byWords[0]).toMatchObject({ documentId: doc.id, content: TIDES.content, page: 2, headingPath: ['Harbour'] });
    expect(byWords[0]?.chunkId).toMatch(/^chunk_/);
    if (!backend.vectors) {
      // Full text only: a query embedding changes nothing, words alone decide.
      expect(await index.search({ ...owner, text: 'zzz', embedding: [0.9, 0.1, 0.05], limit: 2 })).toEqual([]);
      expect((await index.search({ ...owner, text: 'fish stew', embedding: [0.1, 0.2, 0.95], limit: 3 })).map((r) => r.content)).toEqual([TAVERN.content]);
      return;
    }

    const byVector = await index.search({ ...owner, text: 'zzz', embedding: [0.9, 0.1, 0.05], limit: 2 });
    expect(byVector.map((r) => r.content)).toEqual([HARBOUR.content, TIDES.content]);

    // Both lists agree on the tavern: fusion puts it first, above chunks only one list found.
    const fused = await index.search({ ...owner, text: 'fish stew', embedding: [0.1, 0.2, 0.95], limit: 3 });
    expect(fused[0]?.content).toBe(TAVERN.content);
    expect(fused.map((r) => r.score)).toEqual([...fused.map((r) => r.score)].sort((a, b) => b - a));
  });

  it('writes packed chunks as it writes arrays, and builds a block with the event loop free between slices', async () => {
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    const many = Array.from({ length: 300 }, (_, i) => chunk(i, `ledger line ${i} of the harbour master, café ${i}`));
    const writes = index.chunkWrites(doc, PackedChunks.from(many), null);
    expect(writes).toHaveLength(2); // remove the old chunks, then one block
    let turned = false;
    setImmediate(() => (turned = true));
    await writes[1]!.prepare();
    // 300 rows are built in several slices, each after a turn of the event loop: the tick above ran meanwhile.
    expect(turned).toBe(true);
    await db.transaction(async (tx) => {
      await writes[0]!.run(tx);
      await writes[1]!.run(tx);
    });
    const stored = rowsOf<{ ordinal: number; content: string }>(
      await db.execute(sql`select ordinal, content from document_chunks where document_id = ${doc.id} order by ordinal`),
    );
    expect(stored.map((r) => [r.ordinal, r.content])).toEqual(many.map((c) => [c.ordinal, c.content]));
    const found = await index.search({ ...owner, text: 'ledger line 217', embedding: null, limit: 1 });
    expect(found[0]?.content).toBe(many[217]!.content);
  });

  it('finds the words inside addresses, numbers and hyphenated words, in any script, as a query splits them', async () => {
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    const contents = [
      'Write to harbour-master@port.example.com before 3.14 bells.',
      'Die Straße der Fischer ist ÜBER dem Hafen.',
      'नाविक की किताब में ज्वार लिखा है।',
      `${'z'.repeat(5_000)} anchor chain`,
    ];
    await db.transaction((tx) => index.replaceChunks(tx, doc, contents.map((content, i) => chunk(i, content)), null));
    const top = async (text: string) => (await index.search({ ...owner, text, embedding: null, limit: 1 }))[0]?.content;
    expect(await top('example.com')).toBe(contents[0]);
    expect(await top('who is the master?')).toBe(contents[0]);
    expect(await top('the 14 bells')).toBe(contents[0]);
    expect(await top('straße über')).toBe(contents[1]);
    // A vowel sign is part of its word: "किताब" is one word, not three letters.
    expect(await top('किताब')).toBe(contents[2]);
    // A word too long to index is left out; the rest of its chunk is found.
    expect(await top('anchor')).toBe(contents[3]);
    expect(await top('z'.repeat(5_000))).toBeUndefined();
  });

  it("searches only the character's ready documents", async () => {
    const owner = await newOwner(db);
    const other = await newOwner(db);
    const ready = await newDocument(db, owner);
    const processing = await newDocument(db, owner, 'processing');
    const failed = await newDocument(db, owner, 'failed');
    const foreign = await newDocument(db, other);
    for (const doc of [ready, processing, failed, foreign]) {
      await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR], backend.vectors ? [[1, 0, 0]] : null));
    }
    const found = await index.search({ ...owner, text: 'pirates', embedding: [1, 0, 0], limit: 10 });
    expect(found.map((r) => r.documentId)).toEqual([ready.id]);
    expect(await index.search({ projectId: other.projectId, characterId: owner.characterId, text: 'pirates', embedding: [1, 0, 0], limit: 10 })).toEqual([]);
  });

  it('stops finding a document the moment removeDocument commits', async () => {
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES], embeddings()?.slice(0, 2) ?? null));
    expect(await index.search({ ...owner, text: 'pirates', embedding: null, limit: 5 })).toHaveLength(1);
    await db.transaction((tx) => index.removeDocument(tx, doc.id));
    expect(await index.search({ ...owner, text: 'pirates tides', embedding: [1, 0, 0], limit: 5 })).toEqual([]);
    expect(await chunkCount(db, doc.id)).toBe(0);
  });

  it("removes a deleted document's term sets, whether the document, its character or its project is deleted", async () => {
    const termRows = async (documentId: string) =>
      rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from document_terms where document_id = ${documentId}`))[0]?.n ?? -1;
    const [first, second, third] = [await newOwner(db), await newOwner(db), await newOwner(db)];
    const [alone, bystander] = [await newDocument(db, first), await newDocument(db, first)];
    const [ofCharacter, ofProject] = [await newDocument(db, second), await newDocument(db, third)];
    for (const doc of [alone, bystander, ofCharacter, ofProject]) await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES], null));
    expect(await termRows(alone.id)).toBeGreaterThan(5);

    await db.delete(documents).where(eq(documents.id, alone.id));
    await db.delete(characters).where(eq(characters.id, second.characterId));
    await db.delete(projects).where(eq(projects.id, third.projectId));
    expect([await termRows(alone.id), await termRows(ofCharacter.id), await termRows(ofProject.id)]).toEqual([0, 0, 0]);
    expect(await termRows(bystander.id)).toBeGreaterThan(5);
  });

  it('afterWrite vacuums the term sets where the database runs no autovacuum (PGlite), so searches read them from the key', async () => {
    const pglite = backend.kind === 'pglite';
    const vacuuming = await openDocumentIndex({ db, logger: pino({ level: 'silent' }), dimensions: undefined, embeddings: false, vacuumTermSets: pglite });
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    await db.transaction((tx) => vacuuming.replaceChunks(tx, doc, [HARBOUR, TIDES, TAVERN], null));
    const allVisible = async () =>
      rowsOf<{ n: number }>(await db.execute(sql`select relallvisible::int as n from pg_class where relname = 'document_terms'`))[0]?.n ?? -1;
    const before = await allVisible();
    // Two documents finished at once share one VACUUM (or a second, if the first had begun).
    await Promise.all([vacuuming.afterWrite(doc), vacuuming.afterWrite(doc)]);
    if (pglite) expect(await allVisible()).toBeGreaterThan(before);
    else expect(await allVisible()).toBe(before);
    expect((await vacuuming.search({ ...owner, text: 'tides', embedding: null, limit: 3 })).map((r) => r.content)).toEqual([TIDES.content]);
  });

  it('replaces chunks instead of adding to them, and a rolled back replace changes nothing', async () => {
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES, TAVERN], embeddings()));
    await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES, TAVERN], embeddings()));
    expect(await chunkCount(db, doc.id)).toBe(3);
    // Vectors rank every chunk; full text finds the one that says 'harbour'. Never six.
    expect(await index.search({ ...owner, text: 'harbour', embedding: [1, 0, 0], limit: 10 })).toHaveLength(backend.vectors ? 3 : 1);

    await expect(
      db.transaction(async (tx) => {
        await index.replaceChunks(tx, doc, [TIDES], null);
        throw new Error('worker lost its lease');
      }),
    ).rejects.toThrow('worker lost its lease');
    expect(await chunkCount(db, doc.id)).toBe(3);

    await db.transaction((tx) => index.replaceChunks(tx, doc, [TIDES], null));
    expect((await index.search({ ...owner, text: 'harbour tides', embedding: [1, 0, 0], limit: 10 })).map((r) => r.content)).toEqual([TIDES.content]);
  });

  it.runIf(backend.vectors)('retrains the IVFFlat index as chunks grow: once written, one index with a list per 1,000 chunks', async () => {
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    const many = Array.from({ length: 2_500 }, (_, i) => chunk(i, `entry ${i}`));
    const vectors = many.map((_, i) => [Math.cos(i / 100), Math.sin(i / 100), 1 + (i % 7)]);
    await db.transaction((tx) => index.replaceChunks(tx, doc, many, vectors));
    const names = async () => rowsOf<{ indexname: string }>(await db.execute(sql`select indexname from pg_indexes where indexname like ${`document_chunks_embedding_${DIMS}_ivf%`}`)).map((r) => r.indexname);
    // Built on the empty database at startup with one list; the write retrains it in the background, counting
    // the chunks of the transaction that asked once it commits.
    await index.whenRetrained();
    expect(await names()).toEqual([`document_chunks_embedding_${DIMS}_ivf2`]);
    const found = await index.search({ ...owner, text: 'zzzz', embedding: vectors[1234] ?? [], limit: 3 });
    expect(found[0]?.content).toBe('entry 1234');
  });

  it('keeps a chunk row of a few thousand characters whole (no TOAST value to write or read), and moves out only a far longer one', async () => {
    const toastRows = async () => {
      const [table] = rowsOf<{ toast: string }>(await db.execute(sql`select reltoastrelid::regclass::text as toast from pg_class where relname = 'document_chunks'`));
      return rowsOf<{ n: number }>(await db.execute(sql.raw(`select count(*)::int as n from ${table?.toast ?? 'missing'}`)))[0]?.n ?? -1;
    };
    // Words pglz cannot shrink: a long text stays long, so only where the row's limit lies decides.
    const random = seeded(7);
    const words = (chars: number) => {
      let text = '';
      while (text.length < chars) text += `${Math.floor(random() * 1_000_000).toString(36)} `;
      return text.slice(0, chars);
    };
    const owner = await newOwner(db);
    const before = await toastRows();
    const doc = await newDocument(db, owner);
    const long = chunk(0, words(3_000));
    await db.transaction((tx) => index.replaceChunks(tx, doc, [long], backend.vectors ? [[1, 0, 0]] : null));
    expect(await toastRows()).toBe(before);
    const huge = await newDocument(db, owner);
    await db.transaction((tx) => index.replaceChunks(tx, huge, [chunk(0, words(20_000))], backend.vectors ? [[0, 1, 0]] : null));
    expect(await toastRows()).toBeGreaterThan(before);
    expect((await index.search({ ...owner, text: long.content.split(' ').slice(0, 2).join(' '), embedding: null, limit: 1 }))[0]?.content).toBe(long.content);
  });

  it('searches by full text only without an embeddings backend', async () => {
    const textOnly = await openDocumentIndex({ db, logger: pino({ level: 'silent' }), dimensions: undefined, embeddings: false });
    expect(textOnly.vectors).toBe(false);
    const owner = await newOwner(db);
    const doc = await newDocument(db, owner);
    await db.transaction((tx) => textOnly.replaceChunks(tx, doc, [HARBOUR, TIDES], null));
    expect((await textOnly.search({ ...owner, text: 'pirates', embedding: null, limit: 5 })).map((r) => r.content)).toEqual([HARBOUR.content]);
    expect(await textOnly.search({ ...owner, text: '?!', embedding: null, limit: 5 })).toEqual([]);
  });
});

describe('the document index on a PostgreSQL without pgvector (PGlite without the extension)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'troupe-novector-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('migrates without the embedding column, searches by full text and says how to install pgvector', async () => {
    // Where openDatabase keeps PGlite's files for TROUPE_DATA_DIR=dir, so the next test reopens them.
    const client = await PGlite.create(path.join(dir, 'pglite'));
    try {
      const db = drizzle({ client, schema }) as unknown as Db;
      await migrate(drizzle({ client, schema }), { migrationsFolder: MIGRATIONS });
      const { logger, lines } = recordingLogger();
      const index = await openDocumentIndex({ db, logger, dimensions: DIMS, embeddings: true });
      expect(index.vectors).toBe(false);
      expect(lines).toContainEqual(expect.objectContaining({ level: 40, msg: PGVECTOR_MISSING_WARNING }));
      expect(PGVECTOR_MISSING_WARNING).toMatch(/install pgvector/);

      const owner = await newOwner(db);
      const doc = await newDocument(db, owner);
      await db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES], VECTORS.slice(0, 2)));
      const found = await index.search({ ...owner, text: 'tides', embedding: [0, 1, 0], limit: 5 });
      expect(found.map((r) => r.content)).toEqual([TIDES.content]);
    } finally {
      await client.close();
    }
  });

  it('adds vector search at startup once pgvector is there', async () => {
    const database = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
    try {
      const { logger, lines } = recordingLogger();
      const index = await openDocumentIndex({ db: database.db, logger, dimensions: DIMS, embeddings: true });
      expect(index.vectors).toBe(true);
      expect(lines.some((line) => line.level === 40)).toBe(false);
      const owner = await newOwner(database.db);
      const doc = await newDocument(database.db, owner);
      await database.db.transaction((tx) => index.replaceChunks(tx, doc, [HARBOUR, TIDES], VECTORS.slice(0, 2)));
      const found = await index.search({ ...owner, text: 'zzz', embedding: [0, 1, 0], limit: 1 });
      expect(found.map((r) => r.content)).toEqual([TIDES.content]);
    } finally {
      await database.close();
    }
  });
});
