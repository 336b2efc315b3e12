import { sql } from 'drizzle-orm';
import type { Db } from '../db/database.ts';
import { scopeOf, type SearchScope } from './full-text-search.ts';
import { rowsOf, vectorIndexOf } from './pgvector-setup.ts';

/**
 * IVFFlat lists searched per query: a share of the lists, so recall holds as retraining adds
 * lists, and at least IVFFLAT_MIN_PROBES. With the iterative scan more are probed only when
 * these hold fewer than `limit` of the character's chunks. Recall@6 against exact cosine, 256
 * dimensions, the bench's clustered vectors (64 topics): over 235k chunks, 0.94 probing 3 of 240
 * lists, 0.998 at 5 and 10; 0.90 probing 5 of 500 lists, 0.998 at 10 and 20; on PGlite over 30k
 * chunks in 16 lists, 1.0 from 2 probes. Cost is about linear in the chunks probed (PGlite, 16
 * lists: 15 ms at 2 probes, 19 at 3, 31 at 5).
 */
export function probesFor(lists: number): number {
  return Math.max(IVFFLAT_MIN_PROBES, Math.ceil(lists * IVFFLAT_PROBE_SHARE));
}
const IVFFLAT_MIN_PROBES = 3;
const IVFFLAT_PROBE_SHARE = 1 / 40;

export function vectorLiteral(vector: number[]): string {
  if (!vector.every(Number.isFinite)) throw new Error('an embedding holds a value that is not a finite number');
  return `[${vector.join(',')}]`;
}

/**
 * The character's chunks nearest to `vector` by cosine distance, nearest first.
 *
 * `exact`: every chunk of the character is compared (the expression differs from the index's,
 * so the planner cannot use it) - right for small characters, whose chunks are a small share of
 * every list probed. Otherwise the IVFFlat index over halfvec (pgvector-setup.ts), through
 * `document_chunks_nearest` (migration 0011), with pgvector 0.8's iterative scan: filtering by
 * character happens during the scan, which probes more lists until `limit` rows pass the filter
 * instead of returning fewer (post-filtering).
 */
export async function vectorHits(db: Db, scope: SearchScope, vector: number[], limit: number, exact: boolean, probes?: number): Promise<string[]> {
  const n = sql.raw(String(vector.length));
  const literal = vectorLiteral(vector);
  if (exact) {
    const rows = await db.execute(sql`select c.id from document_chunks c
      where c.embedding_dims = ${n} and ${scopeOf(scope)}
      order by c.embedding <=> ${literal}::vector, c.id limit ${limit}`);
    return rowsOf<{ id: string }>(rows).map((row) => row.id);
  }
  // Callers that do not track the index's lists (tools, the bench) pay a catalog read.
  const probing = probes ?? probesFor((await vectorIndexOf(db, vector.length))?.lists ?? 1);
  // Ids are generated (newId: letters, digits, '_'), so the array literal needs no quoting.
  const notReady = `{${scope.notReady.join(',')}}`;
  const rows = await db.execute(sql`select id from document_chunks_nearest(${vector.length}::int, ${literal}, ${scope.projectId}, ${scope.characterId},
    ${notReady}::text[], ${limit}::int, ${probing}::int)`);
  return rowsOf<{ id: string }>(rows).map((row) => row.id);
}
