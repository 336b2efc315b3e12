import { describe, expect, it } from 'vitest';
import { characterIndexElement } from '../../src/retrieval/character-vector-index.ts';

describe("the element of a character's vector index", () => {
  it('is float32 where builds run in a transaction (PGlite), halfvec on a PostgreSQL server', () => {
    expect(characterIndexElement('transaction', 256)).toBe('vector');
    expect(characterIndexElement('concurrent', 256)).toBe('halfvec');
  });

  it("falls back to halfvec above IVFFlat's 2,000 dimensions for vector, so large embeddings still get an index", () => {
    expect(characterIndexElement('transaction', 2000)).toBe('vector');
    expect(characterIndexElement('transaction', 3072)).toBe('halfvec');
  });
});
