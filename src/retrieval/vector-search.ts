import { sql } from 'drizzle-orm';
import type { Db } from '../db/database.ts';
import { executePrepared } from '../db/prepared-statement.ts';
import { rowsOf, vectorIndexOf } from './pgvector-setup.ts';

/**
 * IVFFlat lists searched per query: a share of the lists, so recall holds as retraining adds
 * lists, and at least `min` (the shared index's share and floor unless given: character indexes
 * pass their own). With the iterative scan more are probed only when these hold fewer than
 * `limit` of the character's chunks. Recall@6 against exact cosine, 256
 * dimensions, the bench's clustered vectors (64 topics): over 235k chunks, 0.94 probing 3 of 240
 * lists, 0.998 at 5 and 10; 0.90 probing 5 of 500 lists, 0.998 at 10 and 20; on PGlite over 30k
 * chunks in 16 lists, 1.0 from 2 probes. Cost is about linear in the chunks probed (PGlite, 16
 * lists: 15 ms at 2 probes, 19 at 3, 31 at 5).
 */
export function probesFor(lists: number, share = IVFFLAT_PROBE_SHARE, min = IVFFLAT_MIN_PROBES): number {
  return Math.max(min, Math.ceil(lists * share));
}
const IVFFLAT_MIN_PROBES = 3;
/** The share of an IVFFlat index's lists a search probes (also PGlite's character indexes). */
export const IVFFLAT_PROBE_SHARE = 1 / 40;

export function vectorLiteral(vector: number[]): string {
  if (!vector.every(Number.isFinite)) throw new Error('an embedding holds a value that is not a finite number');
  return `[${vector.join(',')}]`;
}

/** A chunk found by vector search: its id and where it is. */
export interface VectorHit {
  id: string;
  documentId: string;
  ordinal: number;
}

/**
 * The character's chunks in `ready` documents nearest to `vector` by cosine distance, nearest
 * first, through `document_chunks_nearest_ready` (migration 0012): it reads which documents are
 * ready itself, so this can run beside the full-text lookup.
 *
 * Characters with at most `exactUpTo` ready chunks have every chunk compared exactly - right for
 * small characters, whose chunks are a small share of every list probed. Others go through the
 * IVFFlat index over halfvec (pgvector-setup.ts) with pgvector 0.8's iterative scan: filtering by
 * character happens during the scan, which probes more lists until `limit` rows pass the filter
 * instead of returning fewer (post-filtering).
 */
export async function vectorHits(
  db: Db,
  owner: { projectId: string; characterId: string },
  vector: number[],
  limit: number,
  options: { exactUpTo: number; probes?: number },
): Promise<VectorHit[]> {
  // Callers that do not track the index's lists (tools, the bench) pay a catalog read.
  const probes = options.probes ?? probesFor((await vectorIndexOf(db, vector.length))?.lists ?? 1);
  // Infinity (always exact) as the largest bigint.
  const exactUpTo = Number.isFinite(options.exactUpTo) ? Math.floor(options.exactUpTo) : Number.MAX_SAFE_INTEGER;
  const rows = await executePrepared(db, sql`select id, document_id, ordinal from document_chunks_nearest_ready(${vector.length}::int, ${vectorLiteral(vector)},
    ${owner.projectId}, ${owner.characterId}, ${limit}::int, ${probes}::int, ${exactUpTo}::bigint)`);
  return rowsOf<{ id: string; document_id: string; ordinal: number }>(rows).map((row) => ({ id: row.id, documentId: row.document_id, ordinal: Number(row.ordinal) }));
}
