/**
 * The full-text ranking, and its exact top results computed from the per-block chunk sets of
 * `document_terms` (full-text-search.ts reads them).
 *
 * A chunk's score is the sum of the weights of the query's terms it holds, a term weighing
 * ln(1 + N / df) where N is the character's ready chunks and df those holding the term; equal
 * scores are ordered by document id, then position in the document. Every term of the query
 * counts (queryTerms keeps at most 12 words; the 16 rarest words at most).
 */

/** Masks are 16-bit; queryTerms keeps fewer words than this anyway. */
const MAX_PLAN_TERMS = 16;

/** Chunks per `document_terms` row: a term's chunks in a block are one small set. */
export const TERM_BLOCK = 1024;

export interface TermStats {
  term: string;
  /** The character's ready chunks holding the term. */
  df: number;
}

export interface RankedTerm extends TermStats {
  weight: number;
}

export interface TextPlan {
  /** Rarest first; a chunk's match mask has bit i for terms[i]. */
  terms: RankedTerm[];
}

/** The chunks of one block of a document holding one term: a list of offsets or a bitmap. */
export interface TermBlock {
  documentId: string;
  term: string;
  block: number;
  /**
   * bitmap: varbit_send of a bit(TERM_BLOCK) (a 4-byte length, then bit i of the block at byte
   * i >> 3, MSB first); otherwise array_send of the int2[] of offsets in the block.
   */
  bitmap: boolean;
  /** The set is data[start, end): sets share their document's buffer. */
  data: Uint8Array;
  start: number;
  end: number;
}

export interface TextHit {
  documentId: string;
  ordinal: number;
  score: number;
}

/** Weighs the query's terms that some chunk holds; `chunks` is the character's ready chunk count. */
export function planText(stats: readonly TermStats[], chunks: number): TextPlan {
  const present = stats.filter((s) => s.df > 0).sort((a, b) => a.df - b.df || (a.term < b.term ? -1 : a.term > b.term ? 1 : 0));
  // The document counts can lag a chunk count of 0 (documents made outside the processor).
  const n = Math.max(chunks, ...present.map((s) => s.df));
  return { terms: present.slice(0, MAX_PLAN_TERMS).map((s) => ({ ...s, weight: Math.log(1 + n / s.df) })) };
}

/** The score of a chunk holding the terms of `mask`, summed in plan order (the same floats every time). */
export function scoreOf(plan: TextPlan, mask: number): number {
  let score = 0;
  plan.terms.forEach((t, i) => {
    if (mask & (1 << i)) score += t.weight;
  });
  return score;
}

/** Orders text hits as the ranking does: score descending, then document id, then position. */
export function byTextRank(a: TextHit, b: TextHit): number {
  return b.score - a.score || (a.documentId < b.documentId ? -1 : a.documentId > b.documentId ? 1 : a.ordinal - b.ordinal);
}

/**
 * The exact top `limit` chunks for the plan: every chunk holding a query term is scored from
 * the sets, a block at a time (at most TERM_BLOCK masks), without reading a chunk row.
 */
export function topText(plan: TextPlan, sets: readonly TermBlock[], limit: number): TextHit[] {
  const bitOf = new Map(plan.terms.map((t, i) => [t.term, 1 << i]));
  // Every mask's score up front: at most 2^MAX_PLAN_TERMS, usually 2^2 - 2^4.
  const scores = Float64Array.from({ length: 1 << plan.terms.length }, (_, mask) => scoreOf(plan, mask));
  // In ranking order of position, so a later chunk that only ties the last kept one is out.
  // readTermSets sends them so; others are sorted here.
  const ordered = sets.every((set, i) => i === 0 || byPosition(sets[i - 1] as TermBlock, set) <= 0) ? sets : [...sets].sort(byPosition);
  const masks = new Uint16Array(TERM_BLOCK);
  const top: TextHit[] = [];
  for (let first = 0; first < ordered.length; ) {
    const { documentId, block } = ordered[first] as TermBlock;
    let end = first + 1;
    let union = bitOf.get((ordered[first] as TermBlock).term) ?? 0;
    for (; end < ordered.length && byPosition(ordered[first] as TermBlock, ordered[end] as TermBlock) === 0; end++) {
      union |= bitOf.get((ordered[end] as TermBlock).term) ?? 0;
    }
    const next = first;
    first = end;
    // A block whose best chunk (every term it holds) cannot beat the last kept hit is skipped:
    // blocks come in position order, so a tie loses too. A common-word query is decided by the
    // first blocks instead of scoring every chunk.
    if (top.length >= limit && (scores[union] ?? 0) <= (top[top.length - 1]?.score ?? 0)) continue;
    for (let i = next; i < end; i++) {
      const set = ordered[i] as TermBlock;
      addMembers(masks, set, bitOf.get(set.term) ?? 0);
    }
    for (let offset = 0; offset < TERM_BLOCK; offset++) {
      const mask = masks[offset] ?? 0;
      if (mask === 0) continue;
      masks[offset] = 0;
      const score = scores[mask] ?? 0;
      if (top.length >= limit && score <= (top[top.length - 1]?.score ?? 0)) continue;
      offer(top, { documentId, ordinal: block * TERM_BLOCK + offset, score }, limit);
    }
  }
  return top;
}

function byPosition(a: TermBlock, b: TermBlock): number {
  return a.documentId < b.documentId ? -1 : a.documentId > b.documentId ? 1 : a.block - b.block;
}

function addMembers(masks: Uint16Array, set: TermBlock, bit: number): void {
  const { data, start, end } = set;
  if (!set.bitmap) {
    // array_send: dimensions (0 for an empty array), flags, element type, then per dimension its
    // length and lower bound; then per element a 4-byte length (2) and the big-endian int2.
    for (let at = start + 24; at + 1 < end; at += 6) {
      const offset = ((data[at] ?? 0) << 8) | (data[at + 1] ?? 0);
      masks[offset] = (masks[offset] ?? 0) | bit;
    }
    return;
  }
  for (let i = start + 4; i < end; i++) {
    const base = (i - start - 4) << 3;
    // One step per set bit, highest (lowest offset) first.
    for (let byte = data[i] ?? 0; byte !== 0; ) {
      const j = Math.clz32(byte) - 24;
      masks[base + j] = (masks[base + j] ?? 0) | bit;
      byte &= ~(0x80 >> j);
    }
  }
}

/** Keeps `top` the best `limit` hits, sorted (insertion: `limit` is a few dozen). */
function offer(top: TextHit[], hit: TextHit, limit: number): void {
  const last = top[top.length - 1];
  if (top.length >= limit && last && byTextRank(hit, last) >= 0) return;
  let i = top.length;
  while (i > 0 && byTextRank(hit, top[i - 1] as TextHit) < 0) i--;
  top.splice(i, 0, hit);
  if (top.length > limit) top.pop();
}
