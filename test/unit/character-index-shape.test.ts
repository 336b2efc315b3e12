import { describe, expect, it } from 'vitest';
import { characterIndexLists, characterIndexProbes } from '../../src/retrieval/character-vector-index.ts';

describe("the lists and probes of a character's vector index", () => {
  it('on a server, a list per 250 chunks and a sixtieth of them probed: fewer vectors compared for the same recall', () => {
    expect([10_000, 30_000, 100_000].map((chunks) => characterIndexLists(chunks, 'concurrent'))).toEqual([40, 120, 400]);
    expect([40, 320, 400].map((lists) => characterIndexProbes(lists, 'concurrent'))).toEqual([5, 6, 7]);
  });

  it('on PGlite, whose builds hold every database call, a list per 500 chunks and a fortieth probed', () => {
    expect([10_000, 30_000, 100_000].map((chunks) => characterIndexLists(chunks, 'transaction'))).toEqual([20, 60, 200]);
    expect([20, 160, 400].map((lists) => characterIndexProbes(lists, 'transaction'))).toEqual([5, 5, 10]);
  });

  it('never probes fewer than five lists, where recall@6 fell below 0.95 at three, and never builds fewer than one', () => {
    expect(characterIndexProbes(1, 'concurrent')).toBe(5);
    expect(characterIndexProbes(1, 'transaction')).toBe(5);
    expect(characterIndexLists(100, 'concurrent')).toBe(1);
  });
});
