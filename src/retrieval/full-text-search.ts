import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.ts';
import { executePrepared } from '../db/prepared-statement.ts';
import { rowsOf } from './pgvector-setup.ts';
import { TERM_BLOCK, type TermBlock, type TermStats } from './text-ranking.ts';
import { wordsOf } from './words.ts';

export interface TermSets {
  /** The query's words with the character's ready chunks holding each. */
  stats: TermStats[];
  /** The character's ready chunks. */
  chunks: number;
  /** Where the query's words are, per block of each ready document. */
  sets: TermBlock[];
}

interface SetRow {
  id: string;
  chunk_count: number;
  /** The document's sets of the query's words, packed (see readTermSets) in base64, or null. */
  sets: string | null;
}

/**
 * Everything full-text ranking needs, in one round trip: the character's ready documents and
 * their chunk sets of the query's words (words.ts, as BlockTermSets makes them from the
 * chunks). The sets are keyed by (character, word), so each word is one index-only range
 * read for all the character's documents; sets of documents that are not ready drop out in the
 * join. No chunk row is read: a common word costs one small row per block of TERM_BLOCK chunks,
 * not one row per chunk holding it.
 *
 * Each document's sets arrive packed in one base64 text (smaller than bytea's hex), in block
 * order, documents in id order (position order, as topText wants them): per set its word's
 * index in `words` (int2), block and chunks (int4 each), the payload's length (int4), then 0 and
 * array_send(members) or 1 and varbit_send(bits). A row per set with a parsed int2[] cost
 * 375 KB of garbage per search at 100 documents, and its young-generation collections (15 ms)
 * were the search's p99.
 */
export async function readTermSets(db: Executor, owner: { projectId: string; characterId: string }, queryWords: readonly string[]): Promise<TermSets> {
  const words = [...new Set(queryWords)];
  const rows = rowsOf<SetRow>(
    await executePrepared(db, sql`
      with owned as (
        select id, chunk_count from documents where project_id = ${owner.projectId} and character_id = ${owner.characterId} and status = 'ready'
      ), terms as materialized (
        select array(select w.word from json_array_elements_text(${JSON.stringify(words)}::json) with ordinality as w(word, i) order by w.i) as lexemes
      ),
      packed as (
        select dt.document_id, encode(string_agg(int2send((array_position(terms.lexemes, dt.term) - 1)::int2) || int4send(dt.block)
          || int4send(dt.chunks) || int4send(octet_length(p.payload)) || p.payload, ''::bytea order by dt.block), 'base64') as sets
        from terms, document_terms dt,
          lateral (select case when dt.members is null then '\\x01'::bytea || varbit_send(dt.bits) else '\\x00'::bytea || array_send(dt.members) end as payload) as p
        where dt.character_id = ${owner.characterId} and dt.term = any(terms.lexemes)
        group by dt.document_id
      )
      select o.id, o.chunk_count, packed.sets
      from owned o left join packed on packed.document_id = o.id
      order by o.id`),
  );
  const df = new Map<string, number>();
  const sets: TermBlock[] = [];
  let chunks = 0;
  for (const row of rows) {
    chunks += Number(row.chunk_count);
    if (row.sets) unpackSets(row.id, Buffer.from(row.sets, 'base64'), words, sets, df);
  }
  const stats = [...df.entries()].map(([term, n]) => ({ term, df: n }));
  return { stats, chunks, sets };
}

/** Appends one document's packed sets (readTermSets) to `sets`, adding each word's chunks to `df`. */
function unpackSets(documentId: string, packed: Uint8Array, words: readonly string[], sets: TermBlock[], df: Map<string, number>): void {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  for (let at = 0; at < packed.byteLength; ) {
    const term = words[view.getInt16(at)] ?? '';
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
 * A block's term sets, built from its chunks (words.ts) in this thread: which of the block's
 * chunks hold each word, as a list of offsets in the block, or a bitmap above SPARSE_MEMBERS
 * (where the list would be the larger).
 */
export class BlockTermSets {
  readonly #offsets = new Map<string, number[]>();
  readonly block: number;
  constructor(block: number) {
    this.block = block;
  }

  /** Adds the chunk at `ordinal`, which is in this block and not added before. */
  add(ordinal: number, content: string): void {
    const offset = ordinal - this.block * TERM_BLOCK;
    for (const word of wordsOf(content)) {
      const offsets = this.#offsets.get(word);
      if (offsets === undefined) this.#offsets.set(word, [offset]);
      // A word met again in this chunk: its offset is the list's last (no Set per chunk).
      else if (offsets[offsets.length - 1] !== offset) offsets.push(offset);
    }
  }

  /**
   * The rows as the one json parameter of termSetsInsert, by word: the key's order after the
   * character, so its pages are written one after another rather than at random (6% faster
   * filling). UTF-16 order is the key's byte order but for characters beyond the BMP, which
   * only makes those few writes less sequential.
   */
  toJson(): string {
    const rows = [...this.#offsets]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([t, offsets]) => (offsets.length <= SPARSE_MEMBERS ? { t, n: offsets.length, m: offsets } : { t, n: offsets.length, b: bitsHex(offsets) }));
    return JSON.stringify(rows);
  }
}

/** bit(TERM_BLOCK) in hex, bit i for offset i, most significant first (as `B'1' >> i` sets it). */
function bitsHex(offsets: readonly number[]): string {
  const bytes = Buffer.alloc(TERM_BLOCK / 8);
  for (const offset of offsets) bytes[offset >> 3] = (bytes[offset >> 3] ?? 0) | (0x80 >> (offset & 7));
  return bytes.toString('hex');
}

/**
 * The SQL that adds a block's term sets (BlockTermSets.toJson) to `document_terms`. The rows go
 * in as the json orders them; the database parses them and writes, nothing more.
 */
export function termSetsInsert(doc: { id: string; characterId: string }, sets: { block: number; json: string }): SQL {
  return sql`
    insert into document_terms (character_id, document_id, term, block, chunks, members, bits)
    select ${doc.characterId}, ${doc.id}, s.t, ${sets.block}, s.n, s.m, ('x' || s.b)::bit(${sql.raw(String(TERM_BLOCK))})
    from json_to_recordset(${sets.json}::json) as s(t text, n int, m int2[], b text)`;
}

/** Up to this many chunks of a block, a term's set is an int2 list (2 bytes each) rather than a 128-byte bitmap. */
export const SPARSE_MEMBERS = 48;
