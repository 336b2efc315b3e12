import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/database.ts';
import { characters, documents, projects } from '../../src/db/schema.ts';
import type { Chunk } from '../../src/documents/chunker.ts';
import { newId } from '../../src/ids.ts';
import { openDocumentIndex, type DocumentIndex } from '../../src/retrieval/document-index.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { queryTerms } from '../../src/retrieval/query-terms.ts';
import { byTextRank, planText, scoreOf, TERM_BLOCK } from '../../src/retrieval/text-ranking.ts';
import { openDatabaseOn } from '../support/databases.ts';
import { BACKENDS } from '../support/env.ts';
import { cosineDistance, seeded } from '../support/vectors.ts';

/**
 * Every result right: on a generated corpus shared by several characters, DocumentIndex.search
 * returns exactly what a brute-force ranking of the character's ready chunks returns - the
 * full-text ranking of text-ranking.ts, exact cosine, and their reciprocal rank fusion - and
 * the IVFFlat path finds >= 95% of the exact cosine top 6.
 */
const DIMS = 16;
const LIMIT = 6;
const CANDIDATES = 24;
const RRF_K = 60;

const random = seeded(42);
// Words from very common ('oak' is in most chunks) to rare (a few chunks), Zipf-like.
const WORDS = Array.from({ length: 400 }, (_, i) => `w${i.toString(36)}x${'abcdefghij'[i % 10]}`);
const word = () => WORDS[Math.min(WORDS.length - 1, Math.floor(WORDS.length * random() ** 2.5))] ?? 'oak';
const centres = Array.from({ length: 6 }, () => Array.from({ length: DIMS }, () => random() * 2 - 1));
function vector(): number[] {
  const centre = centres[Math.floor(random() * centres.length)] ?? [];
  return Array.from({ length: DIMS }, (_, i) => (centre[i] ?? 0) + (random() * 2 - 1) * 0.7);
}
function chunks(count: number): Chunk[] {
  return Array.from({ length: count }, (_, ordinal) => {
    const content = Array.from({ length: 12 + Math.floor(random() * 20) }, word).join(' ');
    return { ordinal, content, tokenCount: 10, page: null, headingPath: [], startOffset: 0, endOffset: content.length };
  });
}

interface Stored {
  id: string;
  documentId: string;
  ordinal: number;
  words: Set<string>;
  vector: number[];
}

/** The full-text ranking computed over every chunk, the definition the index must match. */
function bruteText(stored: Stored[], text: string): string[] {
  const terms = queryTerms(text);
  const stats = terms.map((term) => ({ term, df: stored.filter((c) => c.words.has(term)).length }));
  const plan = planText(stats, stored.length);
  return stored
    .map((c) => ({ ...c, mask: plan.terms.reduce((m, t, i) => (c.words.has(t.term) ? m | (1 << i) : m), 0) }))
    .filter((c) => c.mask !== 0)
    .map((c) => ({ id: c.id, documentId: c.documentId, ordinal: c.ordinal, score: scoreOf(plan, c.mask) }))
    .sort(byTextRank)
    .map((c) => c.id);
}

function bruteVector(stored: Stored[], query: number[]): string[] {
  return stored
    .map((c) => ({ id: c.id, d: cosineDistance(c.vector, query) }))
    .sort((a, b) => a.d - b.d || (a.id < b.id ? -1 : 1))
    .map((c) => c.id);
}

/** Reciprocal rank fusion; equal scores in the order text ranking uses (document, then position). */
function fuse(stored: Stored[], lists: string[][]): string[] {
  const scores = new Map<string, number>();
  for (const list of lists) list.slice(0, CANDIDATES).forEach((id, i) => scores.set(id, (scores.get(id) ?? 0) + 1 / (RRF_K + i + 1)));
  const at = new Map(stored.map((c) => [c.id, c]));
  return [...scores.entries()]
    .map(([id, score]) => ({ id, documentId: at.get(id)?.documentId ?? '', ordinal: at.get(id)?.ordinal ?? 0, score }))
    .sort(byTextRank)
    .slice(0, LIMIT)
    .map((c) => c.id);
}

describe.each(BACKENDS)('retrieval results on $kind', (backend) => {
  let opened: Awaited<ReturnType<typeof openDatabaseOn>>;
  let db: Db;
  let exact: DocumentIndex;
  let approximate: DocumentIndex;
  const projectId = newId('project');
  const [hero, small, ...others] = Array.from({ length: 5 }, () => newId('character'));
  const owner = (characterId: string | undefined) => ({ projectId, characterId: characterId ?? '' });

  async function addDocument(characterId: string | undefined, count: number, status = 'ready'): Promise<void> {
    const doc = { id: newId('document'), ...owner(characterId) };
    const made = chunks(count);
    await db.transaction(async (tx) => {
      await tx.insert(documents).values({ ...doc, name: 'lore.txt', mimeType: 'text/plain', fileSize: 1, status, chunkCount: count });
      await exact.replaceChunks(tx, doc, made, exact.vectors ? made.map(vector) : null);
    });
  }

  async function storedOf(characterId: string | undefined): Promise<Stored[]> {
    const vectorColumn = exact.vectors ? sql`, c.embedding::text as embedding` : sql``;
    const rows = rowsOf<{ id: string; document_id: string; ordinal: number; content: string; embedding?: string }>(
      await db.execute(sql`select c.id, c.document_id, c.ordinal, c.content${vectorColumn} from document_chunks c join documents d on d.id = c.document_id
        where c.character_id = ${characterId ?? ''} and d.status = 'ready'`),
    );
    return rows.map((r) => ({ id: r.id, documentId: r.document_id, ordinal: r.ordinal, words: new Set(r.content.split(' ')), vector: r.embedding ? (JSON.parse(r.embedding) as number[]) : [] }));
  }

  const queries = Array.from({ length: 40 }, (_, i) => Array.from({ length: 1 + (i % 4) }, word).join(' '));

  beforeAll(async () => {
    opened = await openDatabaseOn(backend);
    db = opened.database.db;
    const logger = pino({ level: 'silent' });
    exact = await openDocumentIndex({ db, logger, dimensions: DIMS, embeddings: true, exactVectorChunks: 1_000_000 });
    approximate = await openDocumentIndex({ db, logger, dimensions: DIMS, embeddings: true, exactVectorChunks: 0 });
    await db.insert(projects).values({ id: projectId, name: 'p' });
    await db.insert(characters).values([hero, small, ...others].map((id) => ({ id: id ?? '', projectId, name: 'c' })));
    // One document spans three blocks of term sets; the commonest words are stored as bitmaps,
    // the others as lists of offsets.
    for (let d = 0; d < 2; d++) await addDocument(hero, 1_000);
    await addDocument(hero, 2 * TERM_BLOCK + 300);
    for (const characterId of others) for (let d = 0; d < 2; d++) await addDocument(characterId, 200);
    // Chunks of a document being reprocessed stay until replaced, but are never results.
    await addDocument(hero, 200, 'processing');
    await addDocument(small, 10);
    await db.execute(sql`analyze`);
  }, 120_000);
  afterAll(async () => {
    await opened.dispose();
  });

  it('ranks full text exactly as the brute-force ranking does (recall@6 = 1.0), returning 6 whenever 6 chunks match', async () => {
    const stored = await storedOf(hero);
    let compared = 0;
    for (const text of queries) {
      // Top 6, as replies ask, and top 24, as fusion takes.
      for (const limit of [LIMIT, CANDIDATES]) {
        const expected = bruteText(stored, text).slice(0, limit);
        const found = await exact.search({ ...owner(hero), text, embedding: null, limit });
        expect(found.map((r) => r.chunkId), `${text} (top ${limit})`).toEqual(expected);
        if (limit === LIMIT && expected.length === LIMIT) compared++;
      }
    }
    expect(compared).toBeGreaterThan(30);
    // The queries cover common words (in most chunks: bitmaps) as well as rare ones (lists).
    const terms = [...new Set(queries.flatMap(queryTerms))];
    const [sets] = rowsOf<{ lists: number | string; bitmaps: number | string }>(
      await db.execute(sql`select count(*) filter (where dt.members is not null) as lists, count(*) filter (where dt.bits is not null) as bitmaps
        from document_terms dt join documents d on d.id = dt.document_id
        where d.character_id = ${hero ?? ''} and dt.term in (${sql.join(terms.map((t) => sql`${t}`), sql`, `)})`),
    );
    expect(Number(sets?.lists)).toBeGreaterThan(10);
    expect(Number(sets?.bitmaps)).toBeGreaterThan(10);
  });

  it.runIf(backend.vectors)('fuses full text and exact cosine exactly as the brute-force ranking does', async () => {
    const stored = await storedOf(hero);
    for (const text of queries) {
      const query = vector();
      const expected = fuse(stored, [bruteText(stored, text), bruteVector(stored, query)]);
      const found = await exact.search({ ...owner(hero), text, embedding: query, limit: LIMIT });
      expect(found.map((r) => r.chunkId), text).toEqual(expected);
    }
  });

  it.runIf(backend.vectors)('finds >= 95% of the exact cosine top 6 through the IVFFlat index, and 6 results even for a character with few chunks', async () => {
    const stored = await storedOf(hero);
    let shared = 0;
    for (let i = 0; i < queries.length; i++) {
      const query = vector();
      const truth = new Set(bruteVector(stored, query).slice(0, LIMIT));
      const found = await approximate.search({ ...owner(hero), text: 'zzzz', embedding: query, limit: LIMIT });
      expect(found).toHaveLength(LIMIT);
      shared += found.filter((r) => truth.has(r.chunkId)).length;
    }
    expect(shared / (queries.length * LIMIT)).toBeGreaterThanOrEqual(0.95);
    // 10 chunks among 4,010: a filtered graph walk must keep going until it has its 6.
    const few = await approximate.search({ ...owner(small), text: 'zzzz', embedding: vector(), limit: LIMIT });
    expect(few).toHaveLength(LIMIT);
  });
});
