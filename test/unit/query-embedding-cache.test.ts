import { describe, expect, it } from 'vitest';
import { QueryEmbeddingCache } from '../../src/retrieval/query-embedding-cache.ts';

describe('QueryEmbeddingCache', () => {
  it('forgets an entry once its lifetime is over', () => {
    let now = 1_000;
    const cache = new QueryEmbeddingCache({ maxEntries: 10, ttlMs: 500, now: () => now });
    cache.set('harbour', [1, 0]);
    now += 499;
    expect(cache.get('harbour')).toEqual([1, 0]);
    now += 1;
    expect(cache.get('harbour')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('keeps at most maxEntries, dropping the least recently used', () => {
    const cache = new QueryEmbeddingCache({ maxEntries: 2, ttlMs: 60_000 });
    cache.set('a', [1]);
    cache.set('b', [2]);
    expect(cache.get('a')).toEqual([1]); // 'b' is now the least recently used
    cache.set('c', [3]);
    expect(cache.size).toBe(2);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toEqual([1]);
    expect(cache.get('c')).toEqual([3]);
  });
});
