import { sql, type SQL } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db, Executor } from '../db/database.ts';
import type { Chunk } from '../documents/chunker.ts';
import { newId } from '../ids.ts';
import { prepareVectorSearch, rowsOf } from './pgvector-setup.ts';
import { queryTerms } from './query-terms.ts';

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
/** Rows per INSERT; 13 parameters a row stays far below PostgreSQL's 65,535. */
const INSERT_BATCH = 500;

export interface PostgresDocumentIndexOptions {
  db: Db;
  logger: Logger;
  /** EMBEDDINGS_DIMENSIONS: the HNSW index is made for this dimension. */
  dimensions: number | undefined;
  /** Whether an embeddings backend is configured (EMBEDDINGS_MODEL). */
  embeddings: boolean;
}

/** Startup: checks for pgvector (warning when it is missing), makes the HNSW index, returns the index. */
export async function openDocumentIndex(options: PostgresDocumentIndexOptions): Promise<PostgresDocumentIndex> {
  const embeddingColumn = await prepareVectorSearch(options.db, options);
  if (embeddingColumn && options.embeddings && options.dimensions === undefined) {
    options.logger.info('EMBEDDINGS_DIMENSIONS is not set, so there is no HNSW index and vector search scans every chunk of a character');
  }
  return new PostgresDocumentIndex({ db: options.db, embeddingColumn, embeddings: options.embeddings });
}

/**
 * Chunks in PostgreSQL (server or PGlite): full text through the generated `tsv` column and
 * its GIN index, vectors through pgvector's HNSW index, fused by reciprocal rank fusion.
 */
class PostgresDocumentIndex implements DocumentIndex {
  readonly vectors: boolean;
  readonly #db: Db;
  /** Whether `document_chunks.embedding` exists, i.e. the server has pgvector. */
  readonly #embeddingColumn: boolean;

  constructor(options: { db: Db; embeddingColumn: boolean; embeddings: boolean }) {
    this.#db = options.db;
    this.#embeddingColumn = options.embeddingColumn;
    this.vectors = options.embeddingColumn && options.embeddings;
  }

  async replaceChunks(tx: Executor, doc: { id: string; projectId: string; characterId: string }, chunks: Chunk[], embeddings: number[][] | null): Promise<void> {
    if (embeddings && embeddings.length !== chunks.length) {
      throw new Error(`${embeddings.length} embeddings for ${chunks.length} chunks`);
    }
    await this.removeDocument(tx, doc.id);
    const withVectors = this.#embeddingColumn && embeddings !== null;
    const columns = sql.raw(
      'id, document_id, project_id, character_id, ordinal, content, token_count, page, heading_path, start_offset, end_offset' +
        (withVectors ? ', embedding, embedding_dims' : ''),
    );
    for (let from = 0; from < chunks.length; from += INSERT_BATCH) {
      const rows = chunks.slice(from, from + INSERT_BATCH).map((c, i) => {
        const values: SQL[] = [
          sql`${newId('chunk')}, ${doc.id}, ${doc.projectId}, ${doc.characterId}, ${c.ordinal}, ${c.content}, ${c.tokenCount}`,
          sql`${c.page}::int, ${JSON.stringify(c.headingPath)}::jsonb, ${c.startOffset}, ${c.endOffset}`,
        ];
        const vector = withVectors ? embeddings?.[from + i] : undefined;
        if (vector) values.push(sql`${vectorLiteral(vector)}::vector, ${vector.length}`);
        return sql`(${sql.join(values, sql`, `)})`;
      });
      await tx.execute(sql`insert into document_chunks (${columns}) values ${sql.join(rows, sql`, `)}`);
    }
  }

  async removeDocument(tx: Executor, documentId: string): Promise<void> {
    await tx.execute(sql`delete from document_chunks where document_id = ${documentId}`);
  }

  async search(query: { projectId: string; characterId: string; text: string; embedding: number[] | null; limit: number }): Promise<RetrievedChunk[]> {
    const candidates = Math.max(query.limit * CANDIDATES_PER_RESULT, 20);
    const scope = sql`c.project_id = ${query.projectId} and c.character_id = ${query.characterId}
      and exists (select 1 from documents d where d.id = c.document_id and d.status = 'ready')`;
    const lists: SQL[] = [];
    const terms = queryTerms(query.text);
    if (terms.length > 0) {
      // All of the words first: precise, and cheap because few chunks match. Only when that
      // finds too little, any of them (a question rarely repeats a passage word for word).
      const textHits = async (operator: ' ' | ' or ') => {
        const tsquery = sql`websearch_to_tsquery('simple', ${terms.join(operator)})`;
        const rows = await this.#db.execute(sql`select c.id from document_chunks c
          where ${scope} and c.tsv @@ ${tsquery}
          order by ts_rank(c.tsv, ${tsquery}) desc, c.id limit ${candidates}`);
        return rowsOf<{ id: string }>(rows).map((row) => row.id);
      };
      let hits = terms.length > 1 ? await textHits(' ') : [];
      if (hits.length < query.limit) hits = await textHits(' or ');
      if (hits.length > 0) {
        const rows = hits.map((id, i) => sql`(${id}::text, ${i + 1}::int)`);
        lists.push(sql`select id, position from (values ${sql.join(rows, sql`, `)}) as text_hits(id, position)`);
      }
    }
    const vector = this.#embeddingColumn ? query.embedding : null;
    if (vector && vector.length > 0) {
      // Same expression as the partial HNSW index, so the planner can use it.
      const n = sql.raw(String(vector.length));
      lists.push(sql`select id, row_number() over (order by distance, id) as position from (
        select c.id, c.embedding::vector(${n}) <=> ${vectorLiteral(vector)}::vector(${n}) as distance from document_chunks c
        where c.embedding_dims = ${n} and ${scope}
        order by distance limit ${candidates}) as vector_hits`);
    }
    if (lists.length === 0) return [];

    const statement = sql`
      with fused as (
        select id, sum(1.0 / (${sql.raw(String(RRF_K))} + position))::float8 as score
        from (${sql.join(lists, sql` union all `)}) as ranked
        group by id
      )
      select c.id, c.document_id, c.content, c.page, c.heading_path, f.score
      from fused f join document_chunks c on c.id = f.id
      order by f.score desc, c.id
      limit ${query.limit}`;
    const result = vector
      ? await this.#db.transaction(async (tx) => {
          // The character's chunks may lie beyond the first nearest neighbours of the whole
          // index; an iterative scan keeps searching until the filtered LIMIT is filled.
          await tx.execute(sql`select set_config('hnsw.iterative_scan', 'relaxed_order', true)`);
          return tx.execute(statement);
        })
      : await this.#db.execute(statement);
    return rowsOf<SearchRow>(result).map((row) => ({
      documentId: row.document_id,
      chunkId: row.id,
      content: row.content,
      score: Number(row.score),
      page: row.page,
      headingPath: typeof row.heading_path === 'string' ? (JSON.parse(row.heading_path) as string[]) : row.heading_path,
    }));
  }
}

interface SearchRow {
  id: string;
  document_id: string;
  content: string;
  page: number | null;
  heading_path: string[] | string;
  score: number | string;
}

function vectorLiteral(vector: number[]): string {
  if (!vector.every(Number.isFinite)) throw new Error('an embedding holds a value that is not a finite number');
  return `[${vector.join(',')}]`;
}
