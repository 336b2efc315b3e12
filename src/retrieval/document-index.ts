import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db, Executor } from '../db/database.ts';
import type { Chunk } from '../documents/chunker.ts';
import { newId } from '../ids.ts';
import { fullTextHits, termStats } from './full-text-search.ts';
import { prepareVectorSearch, rowsOf } from './pgvector-setup.ts';
import { queryTerms } from './query-terms.ts';
import { byRank } from './text-ranking.ts';
import { vectorHits, vectorLiteral } from './vector-search.ts';

export interface DocumentIndex {
  readonly vectors: boolean; // false: full-text only (no pgvector or no embeddings backend)
  /** Replaces every chunk of the document (idempotent: processing twice never duplicates). */
  replaceChunks(tx: Executor, doc: { id: string; projectId: string; characterId: string }, chunks: Chunk[], embeddings: number[][] | null): Promise<void>;
  removeDocument(tx: Executor, documentId: string): Promise<void>;
  /** Top chunks of the character's `ready` documents, fused by reciprocal rank fusion. */
  search(query: { projectId: string; characterId: string; text: string; embedding: number[] | null; limit: number }): Promise<RetrievedChunk[]>;
}
export interface RetrievedChunk { documentId: string; chunkId: string; content: string; score: number; page: number | null; headingPath: string[] }

/** The usual RRF constant: damps the weight of the very first ranks of either list. */
const RRF_K = 60;
/** Each list contributes this many candidates per requested result before fusion. */
const CANDIDATES_PER_RESULT = 4;
/** Rows per INSERT, sent as one JSON parameter (a few MB at most). */
const INSERT_BATCH = 1_000;
/** Characters with at most this many ready chunks are searched by exact cosine, not HNSW. */
const EXACT_VECTOR_CHUNKS = 2_000;

export interface PostgresDocumentIndexOptions {
  db: Db;
  logger: Logger;
  /** EMBEDDINGS_DIMENSIONS: the HNSW index is made for this dimension. */
  dimensions: number | undefined;
  /** Whether an embeddings backend is configured (EMBEDDINGS_MODEL). */
  embeddings: boolean;
  /** Up to this many ready chunks a character's vectors are compared exactly [2,000]. */
  exactVectorChunks?: number;
  /** text-ranking.ts' RARE_CHUNKS_BUDGET (tests make it small to reach every path on a small corpus). */
  rareChunksBudget?: number;
}

/** Startup: checks for pgvector (warning when it is missing), makes the HNSW index, returns the index. */
export async function openDocumentIndex(options: PostgresDocumentIndexOptions): Promise<PostgresDocumentIndex> {
  const embeddingColumn = await prepareVectorSearch(options.db, options);
  if (embeddingColumn && options.embeddings && options.dimensions === undefined) {
    options.logger.info('EMBEDDINGS_DIMENSIONS is not set, so there is no HNSW index and vector search scans every chunk of a character');
  }
  return new PostgresDocumentIndex({ db: options.db, embeddingColumn, embeddings: options.embeddings, exactVectorChunks: options.exactVectorChunks ?? EXACT_VECTOR_CHUNKS, rareChunksBudget: options.rareChunksBudget });
}

/**
 * Chunks in PostgreSQL (server or PGlite): full text through the generated `tsv` column, its GIN
 * index and per-document word counts (full-text-search.ts), vectors through pgvector's HNSW
 * index (vector-search.ts), fused by reciprocal rank fusion.
 */
class PostgresDocumentIndex implements DocumentIndex {
  readonly vectors: boolean;
  readonly #db: Db;
  /** Whether `document_chunks.embedding` exists, i.e. the server has pgvector. */
  readonly #embeddingColumn: boolean;
  readonly #exactVectorChunks: number;
  readonly #rareChunksBudget: number | undefined;

  constructor(options: { db: Db; embeddingColumn: boolean; embeddings: boolean; exactVectorChunks: number; rareChunksBudget: number | undefined }) {
    this.#db = options.db;
    this.#rareChunksBudget = options.rareChunksBudget;
    this.#embeddingColumn = options.embeddingColumn;
    this.#exactVectorChunks = options.exactVectorChunks;
    this.vectors = options.embeddingColumn && options.embeddings;
  }

  async replaceChunks(tx: Executor, doc: { id: string; projectId: string; characterId: string }, chunks: Chunk[], embeddings: number[][] | null): Promise<void> {
    if (embeddings && embeddings.length !== chunks.length) {
      throw new Error(`${embeddings.length} embeddings for ${chunks.length} chunks`);
    }
    await this.removeDocument(tx, doc.id);
    const withVectors = this.#embeddingColumn && embeddings !== null;
    for (let from = 0; from < chunks.length; from += INSERT_BATCH) {
      const rows = chunks.slice(from, from + INSERT_BATCH).map((c, i) => {
        const vector = withVectors ? embeddings?.[from + i] : undefined;
        return {
          id: newId('chunk'), ordinal: c.ordinal, content: c.content, token_count: c.tokenCount, page: c.page,
          heading_path: c.headingPath, start_offset: c.startOffset, end_offset: c.endOffset,
          ...(vector ? { embedding: vectorLiteral(vector), embedding_dims: vector.length } : {}),
        };
      });
      // One JSON parameter per batch instead of a dozen per row; the word counts of the new
      // chunks go into document_terms in the same statement.
      const vectorColumns = withVectors ? sql`, embedding, embedding_dims` : sql``;
      const vectorValues = withVectors ? sql`, r.embedding::vector, r.embedding_dims` : sql``;
      const vectorFields = withVectors ? sql`, embedding text, embedding_dims int` : sql``;
      await tx.execute(sql`
        with inserted as (
          insert into document_chunks (id, document_id, project_id, character_id, ordinal, content, token_count, page, heading_path, start_offset, end_offset${vectorColumns})
          select r.id, ${doc.id}, ${doc.projectId}, ${doc.characterId}, r.ordinal, r.content, r.token_count, r.page, r.heading_path, r.start_offset, r.end_offset${vectorValues}
          from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as r(id text, ordinal int, content text, token_count int, page int,
            heading_path jsonb, start_offset int, end_offset int${vectorFields})
          returning tsv)
        insert into document_terms (document_id, term, chunks)
        select ${doc.id}, t.lexeme, count(*)::int from inserted, unnest(inserted.tsv) as t group by t.lexeme
        on conflict (document_id, term) do update set chunks = document_terms.chunks + excluded.chunks`);
    }
  }

  async removeDocument(tx: Executor, documentId: string): Promise<void> {
    await tx.execute(sql`delete from document_chunks where document_id = ${documentId}`);
    await tx.execute(sql`delete from document_terms where document_id = ${documentId}`);
  }

  async search(query: { projectId: string; characterId: string; text: string; embedding: number[] | null; limit: number }): Promise<RetrievedChunk[]> {
    const candidates = Math.max(query.limit * CANDIDATES_PER_RESULT, 20);
    const owner = { projectId: query.projectId, characterId: query.characterId };
    const { stats, chunks, scope } = await termStats(this.#db, owner, queryTerms(query.text).join(' '));
    const vector = this.#embeddingColumn && query.embedding && query.embedding.length > 0 ? query.embedding : null;
    const [textHits, vectorIds] = await Promise.all([
      stats.length > 0 ? fullTextHits(this.#db, scope, stats, chunks, candidates, this.#rareChunksBudget) : [],
      vector ? vectorHits(this.#db, scope, vector, candidates, chunks <= this.#exactVectorChunks) : [],
    ]);
    const fused = new Map<string, number>();
    for (const list of [textHits.map((hit) => hit.id), vectorIds]) {
      list.forEach((id, i) => fused.set(id, (fused.get(id) ?? 0) + 1 / (RRF_K + i + 1)));
    }
    const top = [...fused.entries()].map(([id, score]) => ({ id, score })).sort(byRank).slice(0, query.limit);
    if (top.length === 0) return [];
    const rows = rowsOf<SearchRow>(
      await this.#db.execute(sql`select c.id, c.document_id, c.content, c.page, c.heading_path from document_chunks c
        where c.id in (${sql.join(top.map((t) => sql`${t.id}`), sql`, `)})`),
    );
    const byId = new Map(rows.map((row) => [row.id, row]));
    return top.flatMap(({ id, score }) => {
      const row = byId.get(id);
      if (!row) return [];
      const headingPath = typeof row.heading_path === 'string' ? (JSON.parse(row.heading_path) as string[]) : row.heading_path;
      return [{ documentId: row.document_id, chunkId: row.id, content: row.content, score, page: row.page, headingPath }];
    });
  }
}

interface SearchRow {
  id: string;
  document_id: string;
  content: string;
  page: number | null;
  heading_path: string[] | string;
}
