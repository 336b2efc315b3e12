import { describe, expect, it } from 'vitest';
import { byTextRank, planText, scoreOf, TERM_BLOCK, topText, type TermBlock } from '../../src/retrieval/text-ranking.ts';

/** A seeded generator, so a failure names the case that made it. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** array_send of an int2[] (what readTermSets sends for a sparse set). */
function arraySend(offsets: number[]): Uint8Array {
  const out = new DataView(new ArrayBuffer(20 + 6 * offsets.length));
  out.setInt32(0, offsets.length === 0 ? 0 : 1);
  out.setInt32(8, 21); // int2
  out.setInt32(12, offsets.length);
  out.setInt32(16, 1);
  offsets.forEach((offset, i) => {
    out.setInt32(20 + 6 * i, 2);
    out.setInt16(24 + 6 * i, offset);
  });
  return new Uint8Array(out.buffer);
}

/** varbit_send of a bit(TERM_BLOCK) (what readTermSets sends for a dense set). */
function varbitSend(offsets: number[]): Uint8Array {
  const out = new Uint8Array(4 + TERM_BLOCK / 8);
  new DataView(out.buffer).setInt32(0, TERM_BLOCK);
  for (const offset of offsets) out[4 + (offset >> 3)] = (out[4 + (offset >> 3)] ?? 0) | (0x80 >> (offset & 7));
  return out;
}

interface Case {
  sets: TermBlock[];
  /** Which terms each chunk holds, by `documentId ordinal`. */
  chunks: Map<string, { documentId: string; ordinal: number; terms: Set<string> }>;
}

/**
 * Documents of two blocks each; some terms in most chunks (bitmaps), others in a few (lists).
 * For even seeds the rarest term is only in the last block, so the best chunks come last.
 */
function makeCase(seed: number, terms: string[]): Case {
  const next = random(seed);
  const sets: TermBlock[] = [];
  const chunks: Case['chunks'] = new Map();
  for (const documentId of ['doc_a', 'doc_b', 'doc_c']) {
    for (let block = 0; block < 2; block++) {
      terms.forEach((term, t) => {
        if (seed % 2 === 0 && t === terms.length - 1 && !(documentId === 'doc_c' && block === 1)) return;
        const share = t === 0 ? 0.6 : 0.02 + 0.05 * t;
        const offsets = Array.from({ length: TERM_BLOCK }, (_, i) => i).filter(() => next() < share);
        if (offsets.length === 0) return;
        for (const offset of offsets) {
          const ordinal = block * TERM_BLOCK + offset;
          const key = `${documentId} ${ordinal}`;
          const chunk = chunks.get(key) ?? { documentId, ordinal, terms: new Set<string>() };
          chunk.terms.add(term);
          chunks.set(key, chunk);
        }
        const bitmap = offsets.length > 48;
        const data = bitmap ? varbitSend(offsets) : arraySend(offsets);
        sets.push({ documentId, term, block, bitmap, data, start: 0, end: data.length });
      });
    }
  }
  return { sets, chunks };
}

describe('topText', () => {
  const terms = ['common', 'rare', 'rarer'];

  it('returns the exact top hits of a brute-force scoring, skipping blocks that cannot win', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const { sets, chunks } = makeCase(seed, terms);
      const df = new Map<string, number>();
      for (const chunk of chunks.values()) for (const term of chunk.terms) df.set(term, (df.get(term) ?? 0) + 1);
      const plan = planText([...df].map(([term, n]) => ({ term, df: n })), 6 * TERM_BLOCK);
      const bitOf = new Map(plan.terms.map((t, i) => [t.term, 1 << i]));
      const brute = [...chunks.values()]
        .map((c) => ({ documentId: c.documentId, ordinal: c.ordinal, score: scoreOf(plan, [...c.terms].reduce((m, t) => m | (bitOf.get(t) ?? 0), 0)) }))
        .sort(byTextRank);
      for (const limit of [1, 6, 24]) expect(topText(plan, sets, limit), `seed ${seed}, top ${limit}`).toEqual(brute.slice(0, limit));
    }
  });

  it('ranks sets given in any order as it ranks them in position order', () => {
    const { sets } = makeCase(7, terms);
    const plan = planText(terms.map((term) => ({ term, df: 100 })), 6 * TERM_BLOCK);
    const shuffled = [...sets].reverse();
    expect(topText(plan, shuffled, 24)).toEqual(topText(plan, sets, 24));
  });

  it('reads a set inside a shared buffer only between its bounds', () => {
    const offsets = [3, 700];
    const own = arraySend(offsets);
    const shared = new Uint8Array(own.length + 20);
    shared.set(own, 10);
    shared.fill(0xff, 0, 10);
    shared.fill(0xff, 10 + own.length);
    const plan = planText([{ term: 'x', df: 2 }], TERM_BLOCK);
    const hits = topText(plan, [{ documentId: 'doc', term: 'x', block: 0, bitmap: false, data: shared, start: 10, end: 10 + own.length }], 10);
    expect(hits.map((hit) => hit.ordinal)).toEqual(offsets);
  });
});
