import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.ts';
import { rowsOf } from './pgvector-setup.ts';
import { TERM_BLOCK, type TermBlock, type TermStats } from './text-ranking.ts';

export interface SearchScope {
  projectId: string;
  characterId: string;
  /** The character's documents that are not `ready` (reprocessing keeps old chunks until replaced). */
  notReady: string[];
}

/**
 * The chunks a search may return: the character's, in `ready` documents. The few documents
 * that are not ready are named, so each chunk is checked without a join the planner could
 * turn into a scan of every ready document's chunks.
 */
export function scopeOf(scope: SearchScope): SQL {
  const owner = sql`c.project_id = ${scope.projectId} and c.character_id = ${scope.characterId}`;
  if (scope.notReady.length === 0) return owner;
  return sql`${owner} and c.document_id not in (${sql.join(scope.notReady.map((id) => sql`${id}`), sql`, `)})`;
}

export interface TermSets {
  /** The query's lexemes with the character's ready chunks holding each. */
  stats: TermStats[];
  /** The character's ready chunks. */
  chunks: number;
  scope: SearchScope;
  /** Where the query's lexemes are, per block of each ready document. */
  sets: TermBlock[];
}

interface SetRow {
  id: string;
  status: string;
  chunk_count: number;
  term: string | null;
  block: number | null;
  chunks: number | null;
  members: number[] | string | null;
  bits: Uint8Array | null;
}

/**
 * Everything full-text ranking needs, in one round trip of index lookups: the character's
 * documents, and for the ready ones the chunk sets of the query's lexemes (as the `simple`
 * configuration makes them from the chunks). No chunk row is read: a common word costs one
 * small row per block of TERM_BLOCK chunks, not one row per chunk holding it.
 */
export async function readTermSets(db: Executor, owner: { projectId: string; characterId: string }, words: string): Promise<TermSets> {
  const rows = rowsOf<SetRow>(
    await db.execute(sql`
      with owned as (
        select id, status, chunk_count from documents where project_id = ${owner.projectId} and character_id = ${owner.characterId}
      ), terms as (select array(select distinct t.lexeme from unnest(to_tsvector('simple', ${words})) as t) as lexemes)
      select o.id, o.status, o.chunk_count, s.term, s.block, s.chunks, s.members, varbit_send(s.bits) as bits
      from owned o cross join terms left join lateral (
        -- offset 0 keeps this a per-document index lookup: flattened, the planner may hash-join
        -- every document's words instead.
        select dt.term, dt.block, dt.chunks, dt.members, dt.bits from document_terms dt
        where o.status = 'ready' and dt.document_id = o.id and dt.term = any(terms.lexemes) offset 0
      ) as s on true`),
  );
  const df = new Map<string, number>();
  const counted = new Set<string>();
  const notReady: string[] = [];
  const sets: TermBlock[] = [];
  let chunks = 0;
  for (const row of rows) {
    if (!counted.has(row.id)) {
      counted.add(row.id);
      if (row.status === 'ready') chunks += Number(row.chunk_count);
      else notReady.push(row.id);
    }
    if (row.term === null || row.block === null) continue;
    df.set(row.term, (df.get(row.term) ?? 0) + Number(row.chunks));
    sets.push({ documentId: row.id, term: row.term, block: Number(row.block), members: membersOf(row.members), bits: row.bits });
  }
  const stats = [...df.entries()].map(([term, n]) => ({ term, df: n }));
  return { stats, chunks, scope: { ...owner, notReady }, sets };
}

/** int2[] arrive parsed from postgres.js and PGlite; the text form is handled in case a driver does not. */
function membersOf(value: number[] | string | null): number[] | null {
  if (value === null || Array.isArray(value)) return value;
  return value.replace(/[{}]/g, '').split(',').filter(Boolean).map(Number);
}

/**
 * The SQL that adds the chunks of `rows` (a CTE with `ordinal` and `content`, all in block
 * `block` of the document) to `document_terms`: a list of offsets for a term in a few chunks of
 * the block, a bitmap above SPARSE_MEMBERS (where the list would be the larger).
 */
export function termSetsInsert(documentId: string, block: number, rows: SQL): SQL {
  // Offsets are gathered unordered (a set; no sort per word), and turned into a bitmap only for
  // the few words in many chunks.
  return sql`
    insert into document_terms (document_id, term, block, chunks, members, bits)
    select ${documentId}, g.lexeme, ${block}, g.n,
      case when g.n <= ${SPARSE_MEMBERS} then g.offsets end,
      case when g.n > ${SPARSE_MEMBERS} then (select bit_or(B'1'::bit(${sql.raw(String(TERM_BLOCK))}) >> o) from unnest(g.offsets) as o) end
    from (
      select t.lexeme, count(*)::int as n, array_agg((r.ordinal - ${block * TERM_BLOCK})::int2) as offsets
      from ${rows} as r, unnest(to_tsvector('simple', r.content)) as t
      group by t.lexeme
    ) as g`;
}

/** Up to this many chunks of a block, a term's set is an int2 list (2 bytes each) rather than a 128-byte bitmap. */
export const SPARSE_MEMBERS = 48;
