import { eq, sql } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/database.ts';
import { characters, documents, projects } from '../../src/db/schema.ts';
import type { Chunk } from '../../src/documents/chunker.ts';
import { newId } from '../../src/ids.ts';
import { characterIndexLists, characterIndexName } from '../../src/retrieval/character-vector-index.ts';
import { openDocumentIndex, type DocumentIndex, type PostgresDocumentIndexOptions } from '../../src/retrieval/document-index.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { openDatabaseOn } from '../support/databases.ts';
import { BACKENDS } from '../support/env.ts';
import { cosineDistance, seeded } from '../support/vectors.ts';

/**
 * Large characters get an IVFFlat index of their own (src/retrieval/character-vector-index.ts):
 * built once a character's ready chunks reach the threshold, rebuilt when they double, given to
 * the largest characters when there is room for only some, dropped with its character, and the
 * one the planner takes for that character's searches, with recall held.
 */
const DIMS = 8;
const LIMIT = 6;
const LIMITS = { minChunks: 1_500, max: 2 };

const random = seeded(7);
const centres = Array.from({ length: 5 }, () => Array.from({ length: DIMS }, () => random() * 2 - 1));
function vector(): number[] {
  const centre = centres[Math.floor(random() * centres.length)] ?? [];
  return Array.from({ length: DIMS }, (_, i) => (centre[i] ?? 0) + (random() * 2 - 1) * 0.7);
}
function chunks(count: number): Chunk[] {
  return Array.from({ length: count }, (_, ordinal) => ({ ordinal, content: `entry ${ordinal}`, tokenCount: 2, page: null, headingPath: [], startOffset: 0, endOffset: 8 }));
}

describe.each(BACKENDS.filter((backend) => backend.vectors))('characters with a vector index of their own on $kind', (backend) => {
  let opened: Awaited<ReturnType<typeof openDatabaseOn>>;
  let db: Db;
  let index: DocumentIndex;
  let open: (extra?: Partial<PostgresDocumentIndexOptions>) => Promise<DocumentIndex>;
  const projectId = newId('project');
  const [hero, second, third, fourth] = Array.from({ length: 4 }, () => newId('character')) as [string, string, string, string];
  // PGlite's lists hold float32, a server's halfvec (character-vector-index.ts).
  const element = backend.kind === 'pglite' ? 'vector' : 'halfvec';
  const nameOf = (characterId: string, lists: number) => characterIndexName(characterId, DIMS, lists, element);
  // A server's lists are finer than PGlite's, whose builds hold every database call (character-vector-index.ts).
  const listsAt = (chunks: number) => characterIndexLists(chunks, backend.kind === 'pglite' ? 'transaction' : 'concurrent');

  async function addDocument(characterId: string, count: number): Promise<void> {
    const doc = { id: newId('document'), projectId, characterId };
    const made = chunks(count);
    await db.transaction(async (tx) => {
      await tx.insert(documents).values({ ...doc, name: 'lore.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready', chunkCount: count });
      await index.replaceChunks(tx, doc, made, made.map(vector));
    });
    await index.afterWrite({ characterId });
  }

  async function registered(): Promise<Record<string, { lists: number; chunks: number; name: string }>> {
    const rows = rowsOf<{ character_id: string; lists: number; chunks: number; index_name: string }>(
      await db.execute(sql`select character_id, lists, chunks, index_name from character_vector_indexes where dimensions = ${DIMS}`),
    );
    return Object.fromEntries(rows.map((r) => [r.character_id, { lists: r.lists, chunks: r.chunks, name: r.index_name }]));
  }

  async function characterIndexes(): Promise<string[]> {
    return rowsOf<{ name: string }>(
      await db.execute(sql`select indexname as name from pg_indexes where tablename = 'document_chunks' and indexname like 'document_chunks_character_%' order by 1`),
    ).map((r) => r.name);
  }

  beforeAll(async () => {
    opened = await openDatabaseOn(backend);
    db = opened.database.db;
    open = (extra = {}) =>
      openDocumentIndex({ db, ownConnection: opened.database.ownConnection, logger: pino({ level: 'silent' }), dimensions: DIMS, embeddings: true, exactVectorChunks: 0, characterIndexes: LIMITS, ...extra });
    index = await open();
    await db.insert(projects).values({ id: projectId, name: 'p' });
    await db.insert(characters).values([hero, second, third, fourth].map((id) => ({ id, projectId, name: 'c' })));
  }, 60_000);
  afterAll(async () => {
    await opened.dispose();
  });

  it('builds one once the ready chunks reach the threshold, and the planner takes it for that character', async () => {
    await addDocument(hero, 1_000);
    expect(await registered()).toEqual({});
    await addDocument(hero, 1_000);
    expect(await registered()).toEqual({ [hero]: { lists: listsAt(2_000), chunks: 2_000, name: nameOf(hero, listsAt(2_000)) } });
    expect(await characterIndexes()).toEqual([nameOf(hero, listsAt(2_000))]);

    // The statement the search function runs, with the probes the row gives.
    const query = `[${vector().join(',')}]`;
    const plan = await db.transaction(async (tx) => {
      await tx.execute(sql`select set_config('ivfflat.probes', probes::text, true) from character_vector_indexes where character_id = ${hero}`);
      return rowsOf<{ 'QUERY PLAN': string }>(
        await tx.execute(sql`explain select c.id from document_chunks c where c.embedding_dims = ${sql.raw(String(DIMS))} and c.project_id = ${projectId}
          and c.character_id = ${hero} order by c.embedding::${sql.raw(`${element}(${DIMS})`)} <=> ${query}::${sql.raw(`${element}(${DIMS})`)} limit 24`),
      ).map((row) => row['QUERY PLAN']);
    });
    expect(plan.join('\n')).toContain(nameOf(hero, listsAt(2_000)));
  });

  it('finds >= 95% of the exact cosine top 6 through it', async () => {
    const stored = rowsOf<{ id: string; embedding: string }>(await db.execute(sql`select id, embedding::text as embedding from document_chunks where character_id = ${hero}`)).map(
      (row) => ({ id: row.id, vector: JSON.parse(row.embedding) as number[] }),
    );
    let shared = 0;
    const queries = 30;
    for (let i = 0; i < queries; i++) {
      const query = vector();
      const truth = new Set(
        stored
          .map((c) => ({ id: c.id, d: cosineDistance(c.vector, query) }))
          .sort((a, b) => a.d - b.d)
          .slice(0, LIMIT)
          .map((c) => c.id),
      );
      const found = await index.search({ projectId, characterId: hero, text: 'zzzz', embedding: query, limit: LIMIT });
      expect(found).toHaveLength(LIMIT);
      shared += found.filter((r) => truth.has(r.chunkId)).length;
    }
    expect(shared / (queries * LIMIT)).toBeGreaterThanOrEqual(0.95);
  });

  it('rebuilds it with more lists once the chunks double, dropping the old one', async () => {
    await addDocument(hero, 1_000);
    expect((await registered())[hero]?.lists).toBe(listsAt(2_000));
    await addDocument(hero, 1_000);
    expect((await registered())[hero]).toEqual({ lists: listsAt(4_000), chunks: 4_000, name: nameOf(hero, listsAt(4_000)) });
    expect(await characterIndexes()).toEqual([nameOf(hero, listsAt(4_000))]);
  });

  it('gives the room there is to the largest characters', async () => {
    await addDocument(second, 1_600);
    await addDocument(third, 1_800);
    // Two at most: the third (1,800) took the place of the second (1,600).
    expect(Object.keys(await registered()).sort()).toEqual([hero, third].sort());
    await addDocument(fourth, 1_700);
    expect(Object.keys(await registered()).sort()).toEqual([hero, third].sort());
    expect(await characterIndexes()).toEqual([nameOf(hero, listsAt(4_000)), nameOf(third, listsAt(1_800))].sort());
    // The evicted character is still searched, through the shared index.
    expect(await index.search({ projectId, characterId: second, text: 'zzzz', embedding: vector(), limit: LIMIT })).toHaveLength(LIMIT);
  });

  it("drops a deleted character's index at the next start, and keeps the others", async () => {
    await db.delete(characters).where(eq(characters.id, third));
    expect(Object.keys(await registered())).toEqual([hero]);
    index = await open();
    expect(await characterIndexes()).toEqual([nameOf(hero, listsAt(4_000))]);
    expect(await index.search({ projectId, characterId: hero, text: 'zzzz', embedding: vector(), limit: LIMIT })).toHaveLength(LIMIT);
  });

  it('replaces an index whose lists hold the other element at the next upkeep, without waiting for the chunks to double', async () => {
    const elementOf = async () =>
      rowsOf<{ element: string }>(await db.execute(sql`select element from character_vector_indexes where character_id = ${hero}`))[0]?.element;
    // As an index made before this backend's element was chosen.
    await db.execute(sql`update character_vector_indexes set element = ${element === 'vector' ? 'halfvec' : 'vector'} where character_id = ${hero}`);
    await index.afterWrite({ characterId: hero });
    expect(await elementOf()).toBe(element);
    expect(await characterIndexes()).toEqual([nameOf(hero, listsAt(4_000))]);
    expect(await index.search({ projectId, characterId: hero, text: 'zzzz', embedding: vector(), limit: LIMIT })).toHaveLength(LIMIT);
  });

  it('refuses to put an id that is not a Troupe id into an index predicate, and builds nothing', async () => {
    const hostile = "chr_x'); drop table documents; --";
    await db.insert(characters).values({ id: hostile, projectId, name: 'h' });
    const doc = { id: newId('document'), projectId, characterId: hostile };
    const made = chunks(1_600);
    await db.transaction(async (tx) => {
      await tx.insert(documents).values({ ...doc, name: 'lore.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready', chunkCount: made.length });
      await index.replaceChunks(tx, doc, made, made.map(vector));
    });
    await expect(index.afterWrite({ characterId: hostile })).rejects.toThrow(/refusing to name a vector index after the character id/);
    expect(Object.keys(await registered())).toEqual([hero]);
    expect(await index.search({ projectId, characterId: hostile, text: 'zzzz', embedding: vector(), limit: LIMIT })).toHaveLength(LIMIT);
  });
});
