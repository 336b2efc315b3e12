// IVFFlat indexes of one character's chunks. The shared index (pgvector-setup.ts) mixes every
// character's vectors in each list, so a search probes lists of which its character holds a
// share and visits the table for every other character's candidate to skip it: 3.4-4.9 ms at
// 300k chunks, the bulk of a hybrid search. A partial index over one character's rows holds
// only what that character's searches want: measured over 300k chunks, 1.0 ms at p50 against
// 1.7 ms (100k-chunk character) and 2.4 ms (7k). Characters get one once they are large, the
// largest first, and a bounded number of them: the planner opens every index of the table to
// plan a statement on it, and each insert tests every partial index's predicate.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db, Executor, OwnConnection } from '../db/database.ts';
import { buildMemorySetting, listsFor, rowsOf, vectorIndexDefinition, vectorIndexLock, type VectorElement } from './pgvector-setup.ts';
import { IVFFLAT_PROBE_SHARE, probesFor } from './vector-search.ts';

/** A character gets an index of its own from this many ready chunks [10,000: 40 lists on a server, 20 on PGlite]. */
export const CHARACTER_INDEX_MIN_CHUNKS = 10_000;
/** At most this many characters have one per dimension; a larger character takes the smallest's. */
export const CHARACTER_INDEXES_MAX = 32;
/** Arbitrary int4: with a hash of the character id, the advisory lock of whoever builds or drops its index. */
const CHARACTER_INDEX_LOCK_CLASS = 730_211_844;
const NAME_PREFIX = 'document_chunks_character_';
/**
 * Probes at least: a character's lists each hold about one subject of its corpus, so its nearest
 * chunks often span several. Recall@6 against exact cosine on the bench's clustered vectors
 * (100k chunks, 80 lists): 0.944 probing 3, below the 0.95 asked; the shared index's 0.998 at 5.
 */
const CHARACTER_INDEX_MIN_PROBES = 5;
/**
 * Chunks per list and the share of lists probed, by how a build runs. A search costs about the
 * vectors in the lists it probes (0.5-0.7 µs each on PostgreSQL, 2-3 µs on PGlite), a build about
 * chunks x lists distances. Over the bench's 100k-chunk character (clustered, 64 subjects),
 * recall@6 against exact cosine / the search function's mean time under pgbench: 100 lists probing
 * 5 (5,000 vectors) 0.996 / 2.4-3.5 ms; 200 probing 5 (2,500) 0.998 / 2.1-2.8 ms; 400 probing 10
 * (2,500) 0.997 but twice the build (4.3 s against 2.7); 400 probing 6 (1,500), 0.986.
 * - A server builds CONCURRENTLY, so nothing waits on a longer build: a list per 250 chunks, a
 *   sixtieth probed (320 lists probing 6 at 100k, 1,875 vectors) cut hybrid search by 6-24% at
 *   p50 against 500 and a fortieth, recall@6 0.994-1.000.
 * - PGlite builds in a transaction that holds every database call: 250 per list doubled that hold
 *   (14.4 s against 7.3 at 80k chunks) and did not speed up its searches at 100k, so it keeps 500.
 */
const LIST_SHAPES: Record<CharacterIndexBuilder['kind'], { chunksPerList: number; probeShare: number }> = {
  concurrent: { chunksPerList: 250, probeShare: 1 / 60 },
  transaction: { chunksPerList: 500, probeShare: IVFFLAT_PROBE_SHARE },
};

/** The lists a character index over `chunks` ready chunks is built with. */
export function characterIndexLists(chunks: number, kind: CharacterIndexBuilder['kind']): number {
  return listsFor(chunks, LIST_SHAPES[kind].chunksPerList);
}

/** The probes its searches use (at least CHARACTER_INDEX_MIN_PROBES). */
export function characterIndexProbes(lists: number, kind: CharacterIndexBuilder['kind']): number {
  return probesFor(lists, LIST_SHAPES[kind].probeShare, CHARACTER_INDEX_MIN_PROBES);
}
/** How often a build waiting for the dimension's DDL lock tries it again. */
const DDL_LOCK_RETRY_MS = 250;

export interface CharacterIndexLimits {
  minChunks: number;
  max: number;
}

interface Registered {
  characterId: string;
  indexName: string;
  chunks: number;
  element: CharacterIndexElement;
}

/** 16 hex digits of the id's md5: names stay within PostgreSQL's 63 bytes whatever the id. */
function hashOf(characterId: string): string {
  return createHash('md5').update(characterId).digest('hex').slice(0, 16);
}

export function characterIndexName(characterId: string, dimensions: number, lists: number, element: CharacterIndexElement = 'halfvec'): string {
  return `${NAME_PREFIX}${hashOf(characterId)}_${dimensions}_ivf${lists}${element === 'vector' ? '_f32' : ''}`;
}

/** The lock key from the name's hash, so a leftover index can be locked without knowing its character. */
function lockOf(hash: string) {
  return sql`${CHARACTER_INDEX_LOCK_CLASS}::int, ${Number.parseInt(hash.slice(0, 8), 16) | 0}::int`;
}

/**
 * A character id as an SQL literal: an index predicate cannot take a parameter. Troupe's ids
 * are letters, digits, `_` and `-`; anything else is refused rather than quoted.
 */
function idLiteral(characterId: string) {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(characterId)) throw new Error(`refusing to name a vector index after the character id ${JSON.stringify(characterId)}`);
  return sql.raw(`'${characterId}'`);
}

/**
 * What a character index's lists hold. `halfvec` is the shared index's expression (so the planner
 * can take either) at half the size. On PGlite pgvector compares `vector` (float32) about twice
 * as fast as halfvec (WebAssembly has no F16C; 1.7-2.1 against 4.2 µs a comparison, 10k rows,
 * baseline-compiled), and a search there is mostly comparisons, so its indexes hold float32.
 */
export type CharacterIndexElement = VectorElement;
/** pgvector's IVFFlat takes `vector` of at most 2,000 dimensions (`halfvec`: 4,000). */
const IVFFLAT_MAX_VECTOR_DIMENSIONS = 2000;

/**
 * The element of a character's index: float32 where builds run in a transaction (PGlite), as far
 * as IVFFlat takes it; halfvec on a PostgreSQL server, which compares it with F16C.
 */
export function characterIndexElement(kind: CharacterIndexBuilder['kind'], dimensions: number | undefined): CharacterIndexElement {
  return kind === 'transaction' && (dimensions ?? 0) <= IVFFLAT_MAX_VECTOR_DIMENSIONS ? 'vector' : 'halfvec';
}

/** The index narrowed to the character's rows, over the expression the search function uses for `element`. */
function definition(characterId: string, dimensions: number, lists: number, element: CharacterIndexElement) {
  return sql`${vectorIndexDefinition(dimensions, lists, element)} and character_id = ${idLiteral(characterId)}`;
}

async function registered(db: Executor, dimensions: number): Promise<Registered[]> {
  return rowsOf<{ character_id: string; index_name: string; chunks: number; element: CharacterIndexElement }>(
    await db.execute(sql`select character_id, index_name, chunks, element from character_vector_indexes where dimensions = ${dimensions} order by chunks, character_id`),
  ).map((row) => ({ characterId: row.character_id, indexName: row.index_name, chunks: Number(row.chunks), element: row.element }));
}

/** The character's chunks of `dimensions` in ready documents. */
async function readyChunksOf(db: Executor, characterId: string, dimensions: number): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(sql`select count(*) as n from document_chunks c join documents d on d.id = c.document_id
      where c.character_id = ${characterId} and c.embedding_dims = ${dimensions} and d.status = 'ready'`),
  );
  return Number(row?.n ?? 0);
}

/**
 * Whether the character's index should be (re)built, cheaply, from its documents' chunk counts:
 * it has no index of `element` and at least `minChunks`, or its ready chunks have doubled since
 * its index was built. The build checks again, under its lock, with exact counts.
 */
export async function characterIndexDue(db: Db, characterId: string, dimensions: number, limits: CharacterIndexLimits, element: CharacterIndexElement): Promise<boolean> {
  const [row] = rowsOf<{ ready: number | string; built: number | string | null }>(
    await db.execute(sql`select coalesce(sum(d.chunk_count), 0) as ready,
      (select i.chunks from character_vector_indexes i where i.character_id = ${characterId} and i.dimensions = ${dimensions} and i.element = ${element}) as built
      from documents d where d.character_id = ${characterId} and d.status = 'ready'`),
  );
  const ready = Number(row?.ready ?? 0);
  if (ready < limits.minChunks) return false;
  return row?.built === null || row?.built === undefined || ready >= Number(row.built) * 2;
}

/** How a build runs: DDL CONCURRENTLY on a connection of its own (PostgreSQL server), or in one transaction (PGlite). */
export type CharacterIndexBuilder =
  | { kind: 'concurrent'; own: OwnConnection; db: Db; element: CharacterIndexElement }
  | { kind: 'transaction'; db: Db; element: CharacterIndexElement };
type Concurrently = ReturnType<typeof sql.raw>;
/** Tries the lock of the character whose id hashes to `hash`; true when granted. */
type Locker = (hash: string) => Promise<boolean>;

/** Held until the transaction ends. */
function transactionLocker(tx: Executor): Locker {
  return async (hash) => lockGranted(await tx.execute(sql`select pg_try_advisory_xact_lock(${lockOf(hash)}) as locked`));
}

/** Held until the connection closes: an own connection closes after its body. */
function sessionLocker(session: Executor): Locker {
  return async (hash) => lockGranted(await session.execute(sql`select pg_try_advisory_lock(${lockOf(hash)}) as locked`));
}

/**
 * Builds, or rebuilds with more lists, the character's own index if it is still due, and
 * registers it once valid. When CHARACTER_INDEXES_MAX characters have one, it takes the place
 * of the smallest if this character is larger, and otherwise does nothing. Returns the lists
 * built, or null when nothing was (not due, no room, or another process holds the character's
 * lock). Searches go on meanwhile: through the old index, or the shared one, until the row is
 * written.
 */
export async function buildCharacterIndex(
  builder: CharacterIndexBuilder,
  options: { characterId: string; dimensions: number; limits: CharacterIndexLimits; logger: Logger },
): Promise<number | null> {
  const { characterId, dimensions, limits, logger } = options;
  const { element } = builder;
  const hash = hashOf(characterId);
  const concurrently = builder.kind === 'concurrent' ? sql.raw('concurrently') : sql.raw('');
  const build = async (db: Executor, locked: Locker): Promise<number | null> => {
    if (!(await locked(hash))) return null;
    const chunks = await readyChunksOf(db, characterId, dimensions);
    const all = await registered(db, dimensions);
    const existing = all.find((row) => row.characterId === characterId);
    // An index of another element (made before PGlite's went float32) is replaced as if due.
    if (chunks < limits.minChunks || (existing && chunks < existing.chunks * 2 && existing.element === element)) return null;
    if (!existing && all.length >= limits.max) {
      const smallest = all[0];
      if (!smallest || smallest.chunks >= chunks || !(await locked(hashOf(smallest.characterId)))) return null;
      await db.execute(sql`delete from character_vector_indexes where character_id = ${smallest.characterId} and dimensions = ${dimensions}`);
      await db.execute(sql`drop index ${concurrently} if exists ${sql.identifier(smallest.indexName)}`);
      logger.info({ characterId: smallest.characterId, dimensions, chunks: smallest.chunks }, 'character vector index given up to a larger character');
    }
    await dropLeftovers(db, concurrently, (name) => name.startsWith(`${NAME_PREFIX}${hash}_${dimensions}_`) && name !== existing?.indexName);
    const lists = characterIndexLists(chunks, builder.kind);
    const name = characterIndexName(characterId, dimensions, lists, element);
    const started = performance.now();
    await db.execute(sql`create index ${concurrently} if not exists ${sql.identifier(name)} ${definition(characterId, dimensions, lists, element)}`);
    try {
      await db.execute(sql`insert into character_vector_indexes (character_id, dimensions, index_name, lists, probes, chunks, element)
        values (${characterId}, ${dimensions}, ${name}, ${lists}, ${characterIndexProbes(lists, builder.kind)}, ${chunks}, ${element})
        on conflict (character_id, dimensions) do update set index_name = excluded.index_name, lists = excluded.lists, probes = excluded.probes,
          chunks = excluded.chunks, element = excluded.element`);
    } catch (err) {
      // The character was deleted during the build (the foreign key): its index goes too.
      if (builder.kind === 'concurrent') await db.execute(sql`drop index concurrently if exists ${sql.identifier(name)}`);
      throw err;
    }
    if (existing && existing.indexName !== name) await db.execute(sql`drop index ${concurrently} if exists ${sql.identifier(existing.indexName)}`);
    logger.info({ characterId, dimensions, lists, chunks, ms: Math.round(performance.now() - started) }, 'character vector index built');
    return lists;
  };
  if (builder.kind === 'transaction') {
    return builder.db.transaction(async (tx) => {
      await tx.execute(sql`select set_config('statement_timeout', '0', true), ${buildMemorySetting(true)}`);
      return build(tx, transactionLocker(tx));
    });
  }
  return builder.own(async (db) => {
    // For this connection only, which closes after (releasing its locks): a build outlasts the pool's statement timeout.
    await db.execute(sql`select set_config('statement_timeout', '0', false), ${buildMemorySetting(false)}`);
    await ddlLock(db, dimensions);
    return build(db, sessionLocker(db));
  });
}

/**
 * Two CREATE or DROP INDEX CONCURRENTLY on one table deadlock (each waits for the other's
 * transaction), so every such build of the dimension, the shared index's retraining too
 * (vector-index-rebuild.ts), holds its build lock. Tried, not waited for in a statement: a
 * session waiting inside one holds a snapshot the running build waits for in turn.
 */
async function ddlLock(session: Executor, dimensions: number): Promise<void> {
  while (!lockGranted(await session.execute(sql`select pg_try_advisory_lock(${vectorIndexLock(dimensions)}) as locked`))) await sleep(DDL_LOCK_RETRY_MS);
}

function lockGranted(result: unknown): boolean {
  return rowsOf<{ locked: boolean }>(result)[0]?.locked === true;
}

/** Character indexes matching `unwanted` (built CONCURRENTLY, a failed or cut-off build leaves an invalid one). */
async function dropLeftovers(db: Executor, concurrently: Concurrently, unwanted: (name: string) => boolean): Promise<void> {
  for (const name of await characterIndexNames(db)) {
    if (unwanted(name)) await db.execute(sql`drop index ${concurrently} if exists ${sql.identifier(name)}`);
  }
}

async function characterIndexNames(db: Executor): Promise<string[]> {
  return rowsOf<{ name: string }>(
    await db.execute(sql`select c.relname as name from pg_index i join pg_class c on c.oid = i.indexrelid
      where i.indrelid = 'document_chunks'::regclass and starts_with(c.relname, ${NAME_PREFIX})`),
  ).map((row) => row.name);
}

/**
 * Startup: drops character indexes no row registers - a deleted character's (its row went with
 * it), or what a cut-off build left - unless a process holds that character's lock (building).
 */
export async function dropUnregisteredCharacterIndexes(builder: CharacterIndexBuilder, dimensions: number, logger: Logger): Promise<void> {
  const unregistered = async (on: Executor) => {
    const known = new Set(rowsOf<{ index_name: string }>(await on.execute(sql`select index_name from character_vector_indexes`)).map((row) => row.index_name));
    return (await characterIndexNames(on)).filter((name) => !known.has(name));
  };
  if ((await unregistered(builder.db)).length === 0) return;
  const drop = async (on: Executor, concurrently: Concurrently, locked: Locker) => {
    for (const name of await unregistered(on)) {
      if (!(await locked(name.slice(NAME_PREFIX.length, NAME_PREFIX.length + 16)))) continue;
      await on.execute(sql`drop index ${concurrently} if exists ${sql.identifier(name)}`);
      logger.info({ index: name }, 'dropped a character vector index no character registers');
    }
  };
  if (builder.kind === 'transaction') await builder.db.transaction((tx) => drop(tx, sql.raw(''), transactionLocker(tx)));
  else {
    await builder.own(async (session) => {
      await ddlLock(session, dimensions);
      await drop(session, sql.raw('concurrently'), sessionLocker(session));
    });
  }
}
