import { describe, expect, it } from 'vitest';
import { ReadCache } from '../../src/cache/read-cache.ts';

describe('ReadCache', () => {
  it('loads once, then serves from memory, evicting the least recently used', async () => {
    const loads: string[] = [];
    const cache = new ReadCache<string>({ maxEntries: 2, load: async (k) => (loads.push(k), `v:${k}`) });
    expect(await cache.get('a')).toBe('v:a');
    expect(await cache.get('a')).toBe('v:a');
    await cache.get('b');
    await cache.get('a'); // a is now most recent
    await cache.get('c'); // evicts b
    expect(cache.size).toBe(2);
    await cache.get('a');
    await cache.get('b');
    expect(loads).toEqual(['a', 'b', 'c', 'b']);
  });

  it('does not cache missing values', async () => {
    let calls = 0;
    const cache = new ReadCache<string>({ maxEntries: 10, load: async () => (calls++, undefined) });
    await cache.get('x');
    await cache.get('x');
    expect(calls).toBe(2);
  });

  it('does not keep a value loaded while an invalidation arrived', async () => {
    let release!: (v: string) => void;
    const cache = new ReadCache<string>({ maxEntries: 10, load: () => new Promise((r) => (release = r)) });
    const pending = cache.get('k');
    cache.invalidate('k'); // a write committed while the read was in flight
    release('stale');
    expect(await pending).toBe('stale');
    expect(cache.size).toBe(0);
  });
});
