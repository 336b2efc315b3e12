import { setImmediate as nextTurn } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db, Executor, OwnConnection } from '../db/database.ts';
import { executePrepared } from '../db/prepared-statement.ts';
import type { Chunk } from '../documents/chunker.ts';
import { chunkList, type ChunkList } from '../documents/packed-chunks.ts';
import { newId } from '../ids.ts';
import { runChunkWrites, type ChunkWrite } from './chunk-write-pipeline.ts';
import { CoalescedRuns } from './coalesced-runs.ts';
import { BlockTermSets, readTermSets, termSetsInsert } from './full-text-search.ts';
import { CHUNKS_PER_LIST, prepareVectorSearch, rowsOf, trainVectorIndex, vectorIndexOf } from './pgvector-setup.ts';
import { queryTerms } from './query-terms.ts';
import { byTextRank, planText, TERM_BLOCK, topText, type TextHit } from './text-ranking.ts';
import {
  buildCharacterIndex,
  CHARACTER_INDEX_MIN_CHUNKS,
  CHARACTER_INDEXES_MAX,
  characterIndexDue,
  characterIndexElement,
  dropUnregisteredCharacterIndexes,
  type CharacterIndexBuilder,
  type CharacterIndexLimits,
} from './character-vector-index.ts';
import { dropFailedBuilds, markAskingWrite, RETRAIN_RETRY_MS, retrainVectorIndexConcurrently, retrainWithRetries } from './vector-index-rebuild.ts';
import { probesFor, vectorHits, vectorLiteral } from './vector-search.ts';

export interface DocumentIndex {
  readonly vectors: boolean; // false: full-text only (no pgvector or no embeddings backend)
  /** Replaces every chunk of the document (idempotent: processing twice never duplicates). */
  replaceChunks(tx: Executor, doc: { id: string; projectId: string; characterId: string }, chunks: readonly Chunk[] | ChunkList, embeddings: number[][] | null): Promise<void>;
  /**
   * replaceChunks as ordered steps (remove the old chunks, then one block each) that may each
   * run in a transaction of their own, so no single one holds PGlite for the whole document.
   * Between steps the document's chunks are incomplete: it must not be `ready` until the last ran.
   */
  chunkWrites(doc: { id: string; projectId: string; characterId: string }, chunks: readonly Chunk[] | ChunkList, embeddings: number[][] | null): ChunkWrite[];
  removeDocument(tx: Executor, documentId: string): Promise<void>;
  /**
   * After a document of the character is ready: upkeep the database does not do itself (term
   * set vacuum on PGlite, the character's own vector index once it is large).
   */
  afterWrite(doc: { characterId: string }): Promise<void>;
  /** Settles once no retraining of the vector index this process's writes started runs or waits to retry. */
  whenRetrained(): Promise<void>;
  /** Top chunks of the character's `ready` documents, fused by reciprocal rank fusion. */
  search(query: { projectId: string; characterId: string; text: string; embedding: number[] | null; limit: number }): Promise<RetrievedChunk[]>;
}
/** Rows of a block built (their json and their words) between two turns of the event loop. */
const ROWS_PER_SLICE = 64;

export interface RetrievedChunk { documentId: string; chunkId: string; content: string; score: number; page: number | null; headingPath: string[] }

/** The usual RRF constant: damps the weight of the very first ranks of either list. */
const RRF_K = 60;
/** Each list contributes this many candidates per requested result before fusion. */
const CANDIDATES_PER_RESULT = 4;
/** Characters with at most this many ready chunks are searched by exact cosine, not the vector index. */
const EXACT_VECTOR_CHUNKS = 2_000;

export interface PostgresDocumentIndexOptions {
  db: Db;
  logger: Logger;
  /** EMBEDDINGS_DIMENSIONS: the vector index is made for this dimension. */
  dimensions: number | undefined;
  /** Whether an embeddings backend is configured (EMBEDDINGS_MODEL). */
  embeddings: boolean;
  /** Up to this many ready chunks a character's vectors are compared exactly [2,000]. */
  exactVectorChunks?: number;
  /** ivfflat.probes: recall against latency [probesFor(lists) in vector-search.ts]. */
  probes?: number;
  /** Database.ownConnection: on a PostgreSQL server, retrainings build CONCURRENTLY on one [none: in a transaction]. */
  ownConnection?: OwnConnection | null;
  /** The database runs no autovacuum (PGlite): afterWrite vacuums the term sets [false]. */
  vacuumTermSets?: boolean;
  /** When characters get a vector index of their own [CHARACTER_INDEX_MIN_CHUNKS, CHARACTER_INDEXES_MAX]. */
  characterIndexes?: Partial<CharacterIndexLimits>;
  /** A failed background retraining is tried again after this long, then twice as long [RETRAIN_RETRY_MS]. */
  retrainRetryMs?: number;
}

/** Startup: checks for pgvector (warning when it is missing), makes the vector index, returns the index. */
export async function openDocumentIndex(options: PostgresDocumentIndexOptions): Promise<PostgresDocumentIndex> {
  const { embeddingColumn, lists } = await prepareVectorSearch(options.db, options);
  const own = options.ownConnection ?? null;
  if (own && lists > 0 && options.dimensions !== undefined) await dropFailedBuilds(options.db, own, { dimensions: options.dimensions, logger: options.logger });
  // Without a connection of its own the database is PGlite (or runs like it): builds in a
  // transaction, and float32 lists, which WebAssembly compares about twice as fast as halfvec.
  const builder: CharacterIndexBuilder = own
    ? { kind: 'concurrent', own, db: options.db, element: characterIndexElement('concurrent', options.dimensions) }
    : { kind: 'transaction', db: options.db, element: characterIndexElement('transaction', options.dimensions) };
  if (lists > 0 && options.dimensions !== undefined) await dropUnregisteredCharacterIndexes(builder, options.dimensions, options.logger);
  if (embeddingColumn && options.embeddings && options.dimensions === undefined) {
    options.logger.info('EMBEDDINGS_DIMENSIONS is not set, so there is no vector index and vector search scans every chunk of a character');
  }
  return new PostgresDocumentIndex({
    db: options.db,
    logger: options.logger,
    embeddingColumn,
    embeddings: options.embeddings,
    exactVectorChunks: options.exactVectorChunks ?? EXACT_VECTOR_CHUNKS,
    probes: options.probes ?? null,
    indexed: lists > 0 && options.dimensions !== undefined ? { dimensions: options.dimensions, lists } : null,
    ownConnection: own,
    vacuumTermSets: options.vacuumTermSets ?? false,
    retrainRetryMs: options.retrainRetryMs ?? RETRAIN_RETRY_MS,
    characterIndexes: {
      builder,
      limits: { minChunks: CHARACTER_INDEX_MIN_CHUNKS, max: CHARACTER_INDEXES_MAX, ...options.characterIndexes },
    },
  });
}

/** At least this many chunks are written between two looks at whether the vector index wants more lists. */
const RETRAIN_CHECK_CHUNKS = 2_000;
/** How often searches look for the lists another process's retraining gave the index (probes follow them). */
const LISTS_REFRESH_MS = 60_000;

/**
 * Chunks in PostgreSQL (server or PGlite): full text through the per-block chunk sets of each
 * document's words in `document_terms` (full-text-search.ts, ranked exactly by text-ranking.ts),
 * vectors through pgvector's IVFFlat index (vector-search.ts), fused by reciprocal rank fusion.
 */
class PostgresDocumentIndex implements DocumentIndex {
  readonly vectors: boolean;
  readonly #db: Db;
  /** Whether `document_chunks.embedding` exists, i.e. the server has pgvector. */
  readonly #embeddingColumn: boolean;
  readonly #exactVectorChunks: number;
  readonly #probes: number | null;
  readonly #logger: Logger;
  /** The vector index's dimension and lists as last seen (`at`); null without one. */
  readonly #indexed: { dimensions: number; lists: number; at: number } | null;
  readonly #own: OwnConnection | null;
  /** Chunks with vectors this process wrote since it last looked at the index's lists. */
  #written = 0;
  /** The retraining this process started, with its retries; null when none is. */
  #retraining: Promise<unknown> | null = null;
  readonly #vacuumTermSets: boolean;
  readonly #retrainRetryMs: number;
  readonly #characterIndexes: { builder: CharacterIndexBuilder; limits: CharacterIndexLimits };
  /** The term-set VACUUM and each character's index upkeep, one run at a time each. */
  readonly #upkeep = new CoalescedRuns();

  constructor(options: {
    db: Db;
    logger: Logger;
    embeddingColumn: boolean;
    embeddings: boolean;
    exactVectorChunks: number;
    probes: number | null;
    indexed: { dimensions: number; lists: number } | null;
    ownConnection: OwnConnection | null;
    vacuumTermSets: boolean;
    retrainRetryMs: number;
    characterIndexes: { builder: CharacterIndexBuilder; limits: CharacterIndexLimits };
  }) {
    this.#retrainRetryMs = options.retrainRetryMs;
    this.#characterIndexes = options.characterIndexes;
    this.#own = options.ownConnection;
    this.#vacuumTermSets = options.vacuumTermSets;
    this.#probes = options.probes;
    this.#logger = options.logger;
    this.#indexed = options.indexed && { ...options.indexed, at: performance.now() };
    this.#db = options.db;
    this.#embeddingColumn = options.embeddingColumn;
    this.#exactVectorChunks = options.exactVectorChunks;
    this.vectors = options.embeddingColumn && options.embeddings;
  }

  async replaceChunks(tx: Executor, doc: { id: string; projectId: string; characterId: string }, chunks: readonly Chunk[] | ChunkList, embeddings: number[][] | null): Promise<void> {
    await runChunkWrites(this.chunkWrites(doc, chunks, embeddings), async (write) => {
      await write.run(tx);
      return true;
    });
  }

  chunkWrites(doc: { id: string; projectId: string; characterId: string }, chunks: readonly Chunk[] | ChunkList, embeddings: number[][] | null): ChunkWrite[] {
    const list = isChunkArray(chunks) ? chunkList(chunks) : chunks;
    if (embeddings && embeddings.length !== list.length) {
      throw new Error(`${embeddings.length} embeddings for ${list.length} chunks`);
    }
    const withVectors = this.#embeddingColumn && embeddings !== null;
    const dimensions = embeddings?.[0]?.length;
    const vectorColumns = withVectors ? sql`, embedding, embedding_dims` : sql``;
    const vectorValues = withVectors ? sql`, r.embedding::vector, r.embedding_dims` : sql``;
    const vectorFields = withVectors ? sql`, embedding text, embedding_dims int` : sql``;
    const rowJson = (index: number, c: Chunk): unknown => {
      const vector = withVectors ? embeddings?.[index] : undefined;
      return {
        id: newId('chunk'), ordinal: c.ordinal, content: c.content, token_count: c.tokenCount, page: c.page,
        heading_path: c.headingPath, start_offset: c.startOffset, end_offset: c.endOffset,
        ...(vector ? { embedding: vectorLiteral(vector), embedding_dims: vector.length } : {}),
      };
    };
    // One statement per block of TERM_BLOCK chunks (ordinals are positions, so a block is one
    // batch): the rows as one json (read once: no jsonb built) parameter, not a dozen per row, and
    // the block's term sets as another. Both are built when its step is prepared.
    const blockWrite = (block: number, indexes: number[]): ChunkWrite => {
      let built: { rows: string; terms: string } | null = null;
      return {
        prepare: async () => {
          const [slices, terms] = [[] as string[], new BlockTermSets(block)];
          for (let from = 0; from < indexes.length; from += ROWS_PER_SLICE) {
            if (from > 0) await nextTurn();
            const slice = indexes.slice(from, from + ROWS_PER_SLICE).map((index) => ({ index, chunk: list.at(index) }));
            slices.push(JSON.stringify(slice.map(({ index, chunk }) => rowJson(index, chunk))).slice(1, -1));
            for (const { chunk } of slice) terms.add(chunk.ordinal, chunk.content);
          }
          await nextTurn();
          built = { rows: `[${slices.join(',')}]`, terms: terms.toJson() };
        },
        run: async (tx) => {
          if (built === null) throw new Error('a chunk write ran before it was prepared');
          await tx.execute(sql`
            with inserted as (
              insert into document_chunks (id, document_id, project_id, character_id, ordinal, content, token_count, page, heading_path, start_offset, end_offset${vectorColumns})
              select r.id, ${doc.id}, ${doc.projectId}, ${doc.characterId}, r.ordinal, r.content, r.token_count, r.page, r.heading_path, r.start_offset, r.end_offset${vectorValues}
              from json_to_recordset(${built.rows}::json) as r(id text, ordinal int, content text, token_count int, page int,
                heading_path jsonb, start_offset int, end_offset int${vectorFields}))
            ${termSetsInsert(doc, { block, json: built.terms })}`);
          built = null;
          if (withVectors) await this.#noteWritten(tx, indexes.length, dimensions);
        },
      };
    };
    const remove: ChunkWrite = { prepare: () => Promise.resolve(), run: (tx) => this.removeDocument(tx, doc.id) };
    return [remove, ...[...blocksOf(list)].map(([block, indexes]) => blockWrite(block, indexes))];
  }

  /**
   * Once the chunks written since the last look could have doubled the index's (or
   * RETRAIN_CHECK_CHUNKS at least), retrains it in the background if it is due, under a lock
   * other processes skip. Either way the retraining waits for the caller's transaction to end:
   * on a PostgreSQL server through the lock markAskingWrite takes in it, otherwise because its
   * own transaction's SHARE lock waits for it.
   */
  async #noteWritten(tx: Executor, chunks: number, dimensions: number | undefined): Promise<void> {
    const indexed = this.#indexed;
    if (!indexed || dimensions !== indexed.dimensions) return;
    this.#written += chunks;
    if (this.#retraining || this.#written < Math.max(RETRAIN_CHECK_CHUNKS, indexed.lists * CHUNKS_PER_LIST)) return;
    this.#retraining = Promise.resolve(); // claimed: a write meanwhile starts no second one
    this.#written = 0;
    const own = this.#own;
    try {
      if (own) await markAskingWrite(tx, dimensions);
    } catch (err) {
      this.#retraining = null;
      throw err;
    }
    const options = { dimensions, logger: this.#logger };
    const retrain = () => (own ? retrainVectorIndexConcurrently(own, options) : trainVectorIndex(this.#db, { ...options, wait: false }));
    // Another build held the lock, or every attempt failed: the next block written looks again.
    const later = () => (this.#written = Math.max(RETRAIN_CHECK_CHUNKS, indexed.lists * CHUNKS_PER_LIST));
    // Set before the write that asked returns: whoever waits on whenRetrained after it sees it.
    this.#retraining = retrainWithRetries(retrain, { retryMs: this.#retrainRetryMs, logger: this.#logger })
      .then(
        (lists) => (lists === null ? later() : Object.assign(indexed, { lists, at: performance.now() })),
        (err: unknown) => {
          later();
          this.#logger.error({ err }, 'gave up retraining the vector index for now; searches use the old one, and the next chunks written try again');
        },
      )
      .finally(() => (this.#retraining = null));
  }

  async whenRetrained(): Promise<void> {
    await this.#retraining;
  }

  async removeDocument(tx: Executor, documentId: string): Promise<void> {
    await tx.execute(sql`delete from document_chunks where document_id = ${documentId}`);
    await tx.execute(sql`delete from document_terms where document_id = ${documentId}`);
  }

  async afterWrite(doc: { characterId: string }): Promise<void> {
    await Promise.all([this.#vacuumOnce(), this.#characterIndexUpkeep(doc.characterId)]);
  }

  /**
   * Searches read term sets from the key alone only on pages the visibility map marks
   * all-visible, which only VACUUM records. PostgreSQL's autovacuum does it (migration 0014 sets
   * how soon); PGlite has none, so this process does, one VACUUM at a time, documents finished
   * meanwhile sharing the next. It visits only pages not yet marked: the new document's.
   */
  #vacuumOnce(): Promise<void> {
    if (!this.#vacuumTermSets) return Promise.resolve();
    return this.#upkeep.run('vacuum', async () => {
      await this.#db.execute(sql`vacuum document_terms`);
    });
  }

  /**
   * Builds the character's own vector index once it is due (character-vector-index.ts), one
   * upkeep per character at a time; documents finished meanwhile share the next look.
   */
  #characterIndexUpkeep(characterId: string): Promise<void> {
    const indexed = this.#indexed;
    if (!indexed || !this.vectors) return Promise.resolve();
    const { builder, limits } = this.#characterIndexes;
    return this.#upkeep.run(`character ${characterId}`, async () => {
      if (await characterIndexDue(this.#db, characterId, indexed.dimensions, limits, builder.element)) {
        await buildCharacterIndex(builder, { characterId, dimensions: indexed.dimensions, limits, logger: this.#logger });
      }
    });
  }

  async search(query: { projectId: string; characterId: string; text: string; embedding: number[] | null; limit: number }): Promise<RetrievedChunk[]> {
    const owner = { projectId: query.projectId, characterId: query.characterId };
    const vector = this.#embeddingColumn && query.embedding && query.embedding.length > 0 ? query.embedding : null;
    // Fusing one list keeps its order, so without a vector list the text top `limit` is the answer.
    const candidates = vector ? Math.max(query.limit * CANDIDATES_PER_RESULT, 20) : query.limit;
    // The vector search finds the ready documents itself, so both lists are read at once.
    const [{ stats, chunks, sets }, vectorList] = await Promise.all([
      readTermSets(this.#db, owner, queryTerms(query.text)),
      vector ? vectorHits(this.#db, owner, vector, candidates, { exactUpTo: this.#exactVectorChunks, probes: this.#probesNow() }) : [],
    ]);
    const textHits = stats.length > 0 ? topText(planText(stats, chunks), sets, candidates) : [];
    // Fused by position (document, ordinal), ties in the order text ranking uses; only the
    // top `limit` chunks' rows are read.
    const fused = new Map<string, TextHit>();
    for (const list of [textHits, vectorList]) {
      list.forEach((hit, i) => {
        const key = `${hit.documentId} ${hit.ordinal}`;
        const entry = fused.get(key) ?? { documentId: hit.documentId, ordinal: hit.ordinal, score: 0 };
        entry.score += 1 / (RRF_K + i + 1);
        fused.set(key, entry);
      });
    }
    const top = [...fused.values()].sort(byTextRank).slice(0, query.limit);
    if (top.length === 0) return [];
    const rows = await this.#rowsAt(top);
    const byKey = new Map(rows.map((row) => [`${row.document_id} ${row.ordinal}`, row]));
    return top.flatMap(({ documentId, ordinal, score }) => {
      const row = byKey.get(`${documentId} ${ordinal}`);
      if (!row) return [];
      const headingPath = typeof row.heading_path === 'string' ? (JSON.parse(row.heading_path) as string[]) : row.heading_path;
      return [{ documentId: row.document_id, chunkId: row.id, content: row.content, score, page: row.page, headingPath }];
    });
  }

  /** Probes for the index's lists as last seen, looking again (in the background) once a minute. */
  #probesNow(): number {
    const indexed = this.#indexed;
    if (this.#probes !== null || !indexed) return this.#probes ?? 1;
    if (performance.now() - indexed.at > LISTS_REFRESH_MS) {
      indexed.at = performance.now();
      vectorIndexOf(this.#db, indexed.dimensions).then(
        (found) => {
          if (found) indexed.lists = found.lists;
        },
        (err: unknown) => this.#logger.warn({ err }, 'could not read the vector index lists'),
      );
    }
    return probesFor(indexed.lists);
  }

  /**
   * The rows of the chunks at these positions, one round trip. The positions go as two array
   * parameters, so the statement's text is one and fixed (prepared once per connection) and no
   * SQL is built per hit.
   */
  async #rowsAt(hits: TextHit[]): Promise<SearchRow[]> {
    // Document ids are Troupe's own (letters, digits, underscores): safe inside an array literal.
    const documentIds = `{${hits.map((hit) => hit.documentId).join(',')}}`;
    const ordinals = `{${hits.map((hit) => hit.ordinal).join(',')}}`;
    return rowsOf<SearchRow>(
      await executePrepared(this.#db, sql`select c.id, c.document_id, c.ordinal, c.content, c.page, c.heading_path
        from unnest(${documentIds}::text[], ${ordinals}::int[]) as k(document_id, ordinal)
        join document_chunks c on c.document_id = k.document_id and c.ordinal = k.ordinal`),
    );
  }
}

/** The chunks grouped by block of TERM_BLOCK ordinals, in order, with their index in `chunks`. */
function blocksOf(chunks: ChunkList): Map<number, number[]> {
  const blocks = new Map<number, number[]>();
  for (let index = 0; index < chunks.length; index++) {
    const block = Math.floor(chunks.ordinal(index) / TERM_BLOCK);
    const list = blocks.get(block);
    if (list) list.push(index);
    else blocks.set(block, [index]);
  }
  return blocks;
}

const isChunkArray = (chunks: readonly Chunk[] | ChunkList): chunks is readonly Chunk[] => Array.isArray(chunks);

interface SearchRow {
  id: string;
  document_id: string;
  ordinal: number;
  content: string;
  page: number | null;
  heading_path: string[] | string;
}
