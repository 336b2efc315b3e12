import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.ts';
import { executePrepared } from '../db/prepared-statement.ts';
import { rowsOf } from './pgvector-setup.ts';
import { TERM_BLOCK, type TermBlock, type TermStats } from './text-ranking.ts';

export interface TermSets {
  /** The query's lexemes with the character's ready chunks holding each. */
  stats: TermStats[];
  /** The character's ready chunks. */
  chunks: number;
  /** Where the query's lexemes are, per block of each ready document. */
  sets: TermBlock[];
}

interface SetRow {
  id: string;
  chunk_count: number;
  /** The query's lexemes, space-separated, as the sets' term numbers count them. */
  lexemes: string;
  /** The document's sets of the query's lexemes, packed (see readTermSets) in base64, or null. */
  sets: string | null;
}

/**
 * Everything full-text ranking needs, in one round trip: the character's ready documents and
 * their chunk sets of the query's lexemes (as the `simple` configuration makes them from the
 * chunks). The sets are keyed by (character, lexeme), so each lexeme is one index-only range
 * read for all the character's documents; sets of documents that are not ready drop out in the
 * join. No chunk row is read: a common word costs one small row per block of TERM_BLOCK chunks,
 * not one row per chunk holding it.
 *
 * Each document's sets arrive packed in one base64 text (smaller than bytea's hex), in block
 * order, documents in id order (position order, as topText wants them): per set its lexeme's
 * number (int2), block and chunks (int4 each), the payload's length (int4), then 0 and
 * array_send(members) or 1 and varbit_send(bits). A row per set with a parsed int2[] cost
 * 375 KB of garbage per search at 100 documents, and its young-generation collections (15 ms)
 * were the search's p99.
 */
export async function readTermSets(db: Executor, owner: { projectId: string; characterId: string }, words: string): Promise<TermSets> {
  const rows = rowsOf<SetRow>(
    await executePrepared(db, sql`
      with owned as (
        select id, chunk_count from documents where project_id = ${owner.projectId} and character_id = ${owner.characterId} and status = 'ready'
      ), terms as materialized (select array(select distinct t.lexeme from unnest(to_tsvector('simple', ${words})) as t) as lexemes),
      packed as (
        select dt.document_id, encode(string_agg(int2send((array_position(terms.lexemes, dt.term) - 1)::int2) || int4send(dt.block)
          || int4send(dt.chunks) || int4send(octet_length(p.payload)) || p.payload, ''::bytea order by dt.block), 'base64') as sets
        from terms, document_terms dt,
          lateral (select case when dt.members is null then '\\x01'::bytea || varbit_send(dt.bits) else '\\x00'::bytea || array_send(dt.members) end as payload) as p
        where dt.character_id = ${owner.characterId} and dt.term = any(terms.lexemes)
        group by dt.document_id
      )
      select o.id, o.chunk_count, array_to_string(terms.lexemes, ' ') as lexemes, packed.sets
      from owned o cross join terms left join packed on packed.document_id = o.id
      order by o.id`),
  );
  const df = new Map<string, number>();
  const sets: TermBlock[] = [];
  let chunks = 0;
  const lexemes = rows[0]?.lexemes.split(' ') ?? [];
  for (const row of rows) {
    chunks += Number(row.chunk_count);
    if (row.sets) unpackSets(row.id, Buffer.from(row.sets, 'base64'), lexemes, sets, df);
  }
  const stats = [...df.entries()].map(([term, n]) => ({ term, df: n }));
  return { stats, chunks, sets };
}

/** Appends one document's packed sets (readTermSets) to `sets`, adding each lexeme's chunks to `df`. */
function unpackSets(documentId: string, packed: Uint8Array, lexemes: string[], sets: TermBlock[], df: Map<string, number>): void {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  for (let at = 0; at < packed.byteLength; ) {
    const term = lexemes[view.getInt16(at)] ?? '';
    const block = view.getInt32(at + 2);
    const count = view.getInt32(at + 6);
    const length = view.getInt32(at + 10);
    const bitmap = packed[at + 14] === 1;
    sets.push({ documentId, term, block, bitmap, data: packed, start: at + 15, end: at + 14 + length });
    at += 14 + length;
    df.set(term, (df.get(term) ?? 0) + count);
  }
}

/**
 * The SQL that adds the chunks of `rows` (a CTE with `ordinal` and `content`, all in block
 * `block` of the document) to `document_terms`: a list of offsets for a term in a few chunks of
 * the block, a bitmap above SPARSE_MEMBERS (where the list would be the larger).
 */
export function termSetsInsert(doc: { id: string; characterId: string }, block: number, rows: SQL): SQL {
  // Offsets are gathered unordered (a set; no sort per word), and turned into a bitmap only for
  // the few words in many chunks. Rows go in by word, the key's order after the character, so
  // the key's pages are written one after another rather than at random (6% faster filling),
  // sorted byte by byte as the key compares them (migration 0018).
  // tsvector_to_array: the lexemes alone (unnest of the tsvector also builds each one's positions).
  return sql`
    insert into document_terms (character_id, document_id, term, block, chunks, members, bits)
    select ${doc.characterId}, ${doc.id}, g.lexeme, ${block}, g.n,
      case when g.n <= ${SPARSE_MEMBERS} then g.offsets end,
      case when g.n > ${SPARSE_MEMBERS} then (select bit_or(B'1'::bit(${sql.raw(String(TERM_BLOCK))}) >> o) from unnest(g.offsets) as o) end
    from (
      select t.lexeme, count(*)::int as n, array_agg((r.ordinal - ${block * TERM_BLOCK})::int2) as offsets
      from ${rows} as r, unnest(tsvector_to_array(to_tsvector('simple', r.content))) as t(lexeme)
      group by t.lexeme
    ) as g
    order by g.lexeme collate "C"`;
}

/** Up to this many chunks of a block, a term's set is an int2 list (2 bytes each) rather than a 128-byte bitmap. */
export const SPARSE_MEMBERS = 48;
