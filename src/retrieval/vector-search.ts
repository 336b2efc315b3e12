import { sql } from 'drizzle-orm';
import type { Db } from '../db/database.ts';
import { scopeOf, type SearchScope } from './full-text-search.ts';
import { rowsOf } from './pgvector-setup.ts';

/**
 * HNSW candidates examined per scan step (pgvector's default is 40). With the iterative scan
 * this is the recall knob, not a cap on results. Recall@6 against exact cosine, 100k-chunk
 * character among 300k, 256 dimensions, the bench's clustered vectors, 100 queries: 0.88 at
 * 100, 0.93 at 200, 0.94 at 300, 0.955 at 400-500 - where latency doubles (about 20 -> 45 ms
 * p50 on the loaded 2-core bench machine), which at 20 queries/s queues the hybrid searches.
 */
export const HNSW_EF_SEARCH = 300;

export function vectorLiteral(vector: number[]): string {
  if (!vector.every(Number.isFinite)) throw new Error('an embedding holds a value that is not a finite number');
  return `[${vector.join(',')}]`;
}

/**
 * The character's chunks nearest to `vector` by cosine distance, nearest first.
 *
 * `exact`: every chunk of the character is compared (the expression differs from the HNSW
 * index's, so the planner cannot use it) - right for small characters, where a filtered graph
 * walk would wade through other characters' chunks. Otherwise the HNSW index, with pgvector
 * 0.8's iterative scan: filtering by character happens during the walk, which goes on until
 * `limit` rows pass the filter instead of returning fewer (post-filtering).
 */
export async function vectorHits(db: Db, scope: SearchScope, vector: number[], limit: number, exact: boolean, efSearch = HNSW_EF_SEARCH): Promise<string[]> {
  const n = sql.raw(String(vector.length));
  const literal = vectorLiteral(vector);
  if (exact) {
    const rows = await db.execute(sql`select c.id from document_chunks c
      where c.embedding_dims = ${n} and ${scopeOf(scope)}
      order by c.embedding <=> ${literal}::vector, c.id limit ${limit}`);
    return rowsOf<{ id: string }>(rows).map((row) => row.id);
  }
  const rows = await db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ${String(efSearch)}, true)`);
    // Same expression as the partial HNSW index, so the planner can use it; relaxed order is
    // put right by the outer sort.
    return tx.execute(sql`select id from (
      select c.id, c.embedding::vector(${n}) <=> ${literal}::vector(${n}) as distance from document_chunks c
      where c.embedding_dims = ${n} and ${scopeOf(scope)}
      order by distance limit ${limit}) as hits
      order by distance, id`);
  });
  return rowsOf<{ id: string }>(rows).map((row) => row.id);
}
