import { describe, expect, it } from 'vitest';
import { BlockTermSets, SPARSE_MEMBERS } from '../../src/retrieval/full-text-search.ts';
import { queryTerms } from '../../src/retrieval/query-terms.ts';
import { TERM_BLOCK } from '../../src/retrieval/text-ranking.ts';
import { MAX_WORD_LENGTH, wordsOf } from '../../src/retrieval/words.ts';

describe('wordsOf', () => {
  it('splits on everything but letters, marks and digits, and lower-cases', () => {
    expect(wordsOf('E-mail harbour-master@port.example.com, 3.14 naïve STRASSE Straße')).toEqual([
      'e', 'mail', 'harbour', 'master', 'port', 'example', 'com', '3', '14', 'naïve', 'strasse', 'straße',
    ]);
    expect(wordsOf('किताब')).toEqual(['किताब']);
    expect(wordsOf('nul\u0000byte\u{1F600}emoji')).toEqual(['nul', 'byte', 'emoji']);
  });

  it('leaves out words longer than MAX_WORD_LENGTH', () => {
    expect(wordsOf(`${'a'.repeat(MAX_WORD_LENGTH)} ${'b'.repeat(MAX_WORD_LENGTH + 1)} c`)).toEqual(['a'.repeat(MAX_WORD_LENGTH), 'c']);
  });

  it('is how queries are split too', () => {
    expect(queryTerms('Who keeps the harbour-master\'s cannon?')).toEqual(['keeps', 'harbour', 'master', 'cannon']);
  });
});

describe('BlockTermSets', () => {
  it("lists each word's chunks once, as offsets up to SPARSE_MEMBERS chunks and as a bitmap above", () => {
    const block = 3;
    const sets = new BlockTermSets(block);
    const base = block * TERM_BLOCK;
    for (let i = 0; i <= SPARSE_MEMBERS; i++) sets.add(base + i * 7, i === 2 ? 'common rare rare Rare' : 'common');
    const rows = JSON.parse(sets.toJson()) as { t: string; n: number; m?: number[]; b?: string }[];
    expect(rows.map((r) => r.t)).toEqual(['common', 'rare']);
    expect(rows[1]).toEqual({ t: 'rare', n: 1, m: [14] });
    const common = rows[0]!;
    expect(common.n).toBe(SPARSE_MEMBERS + 1);
    expect(common.m).toBeUndefined();
    const bits = Buffer.from(common.b ?? '', 'hex');
    expect(bits).toHaveLength(TERM_BLOCK / 8);
    const set: number[] = [];
    for (let offset = 0; offset < TERM_BLOCK; offset++) if ((bits[offset >> 3]! & (0x80 >> (offset & 7))) !== 0) set.push(offset);
    expect(set).toEqual(Array.from({ length: SPARSE_MEMBERS + 1 }, (_, i) => i * 7));
  });
});
