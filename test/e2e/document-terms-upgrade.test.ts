// Upgrading a store whose term sets were written before migration 0014 keyed them by character:
// the sets are carried over with each document's character, migration 0019 rebuilds them from
// the chunks by the words of words.ts, and search finds them.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import { pino } from 'pino';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database, type Db } from '../../src/db/database.ts';
import * as schema from '../../src/db/schema.ts';
import { openDocumentIndex } from '../../src/retrieval/document-index.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { createTempDatabase } from '../support/databases.ts';
import { BACKENDS } from '../support/env.ts';

const MIGRATIONS = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../src/db/migrations');
/** The last migration with term sets keyed by document. */
const BEFORE = '0013_document_terms_trigger';

/** A copy of the migrations folder that ends at BEFORE. */
async function migrationsUpTo(dir: string): Promise<string> {
  const folder = path.join(dir, 'migrations');
  await cp(MIGRATIONS, folder, { recursive: true });
  const journalPath = path.join(folder, 'meta', '_journal.json');
  const journal = JSON.parse(await readFile(journalPath, 'utf8')) as { entries: { tag: string }[] };
  const last = journal.entries.findIndex((entry) => entry.tag === BEFORE);
  expect(last).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, last + 1);
  await writeFile(journalPath, JSON.stringify(journal));
  return folder;
}

/** Two characters with a ready document each, chunks and term sets written as before 0014. */
async function writeOldLayout(db: Db): Promise<void> {
  await db.execute(sql`insert into projects (id, name) values ('project_up', 'p')`);
  for (const [character, document, content] of [
    ['character_rook', 'document_rook', 'The harbour master of port.example.com keeps a cannon by the pier.'],
    ['character_wren', 'document_wren', 'A cannon fired at dawn wakes the whole harbour.'],
  ] as const) {
    await db.execute(sql`insert into characters (id, project_id, name) values (${character}, 'project_up', ${character})`);
    await db.execute(sql`insert into documents (id, project_id, character_id, name, mime_type, file_size, status, chunk_count)
      values (${document}, 'project_up', ${character}, 'notes.txt', 'text/plain', 1, 'ready', 1)`);
    await db.execute(sql`insert into document_chunks (id, document_id, project_id, character_id, ordinal, content, token_count, start_offset, end_offset)
      values (${`chunk_${document}`}, ${document}, 'project_up', ${character}, 0, ${content}, 10, 0, ${content.length})`);
    await db.execute(sql`insert into document_terms (document_id, term, block, chunks, members)
      select ${document}, t.lexeme, 0, 1, array[0]::int2[] from unnest(to_tsvector('simple', ${content})) as t`);
  }
}

describe.each(BACKENDS)('term sets written before migration 0014 on $kind', (backend) => {
  let dir: string;
  let database: Database;
  let dropDatabase = async (): Promise<void> => {};

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'troupe-terms-upgrade-'));
    const migrationsFolder = await migrationsUpTo(dir);
    if (backend.kind === 'pglite') {
      // Where openDatabase keeps PGlite's files for TROUPE_DATA_DIR=dir.
      const client = await PGlite.create(path.join(dir, 'pglite'));
      try {
        const db = drizzlePglite({ client, schema });
        await migratePglite(db, { migrationsFolder });
        await writeOldLayout(db as unknown as Db);
      } finally {
        await client.close();
      }
      database = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
      return;
    }
    const temp = await createTempDatabase(backend.url);
    dropDatabase = temp.drop;
    const client = postgres(temp.url, { max: 1, onnotice: () => {} });
    try {
      const db = drizzlePostgres({ client, schema });
      await migratePostgres(db, { migrationsFolder });
      await writeOldLayout(db as unknown as Db);
    } finally {
      await client.end();
    }
    database = await openDatabase({ databaseUrl: temp.url, dataDir: '', poolSize: 2 });
  });
  afterAll(async () => {
    await database.close();
    await dropDatabase();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps every document\'s sets, under its character, rebuilt by the words of words.ts', async () => {
    const rows = rowsOf<{ document_id: string; character_id: string; n: number }>(
      await database.db.execute(sql`select document_id, character_id, count(*)::int as n from document_terms group by 1, 2 order by 1`),
    );
    expect(rows).toEqual([
      // to_tsvector made 10 words of it, "port.example.com" one of them; words.ts makes 12.
      { document_id: 'document_rook', character_id: 'character_rook', n: 12 },
      { document_id: 'document_wren', character_id: 'character_wren', n: 9 },
    ]);
  });

  it('compares terms byte by byte, and the rebuilt key still holds the sets', async () => {
    const [row] = rowsOf<{ collation: string; key: string }>(
      await database.db.execute(sql`select pg_collation_for(term) as collation,
        pg_get_indexdef('document_terms_character_id_term_document_id_block_pk'::regclass) as key from document_terms limit 1`),
    );
    expect(row?.collation).toBe('"C"');
    // Searches read the sets from the key alone (an index-only scan): migration 0018 rebuilt it.
    expect(row?.key).toMatch(/\(character_id, term, document_id, block\) INCLUDE \(chunks, members, bits\)$/);
  });

  it('finds each character its own chunks by words, and deletes still remove a document sets', async () => {
    const index = await openDocumentIndex({ db: database.db, logger: pino({ level: 'silent' }), dimensions: undefined, embeddings: false });
    const search = (characterId: string) => index.search({ projectId: 'project_up', characterId, text: 'cannon harbour', embedding: null, limit: 3 });
    expect((await search('character_rook')).map((hit) => hit.chunkId)).toEqual(['chunk_document_rook']);
    expect((await search('character_wren')).map((hit) => hit.chunkId)).toEqual(['chunk_document_wren']);
    // A part of an address the old parser kept whole is a word of its own now.
    const example = await index.search({ projectId: 'project_up', characterId: 'character_rook', text: 'example', embedding: null, limit: 3 });
    expect(example.map((hit) => hit.chunkId)).toEqual(['chunk_document_rook']);

    await database.db.execute(sql`delete from documents where id = 'document_rook'`);
    const left = rowsOf<{ document_id: string }>(await database.db.execute(sql`select distinct document_id from document_terms`));
    expect(left).toEqual([{ document_id: 'document_wren' }]);
    expect(await search('character_rook')).toEqual([]);
  });
});
