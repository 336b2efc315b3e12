import { describe, expect, it } from 'vitest';
import type { Chunk } from '../../src/documents/chunker.ts';
import { chunkList, packChunks, PackedChunks } from '../../src/documents/packed-chunks.ts';

const chunk = (ordinal: number, content: string, extra: Partial<Chunk> = {}): Chunk => ({
  ordinal, content, tokenCount: Math.ceil(content.length / 4), page: null, headingPath: [], startOffset: ordinal * 10, endOffset: ordinal * 10 + content.length, ...extra,
});

describe('packed chunks', () => {
  it('give back every field of every chunk, text byte for byte', () => {
    const chunks = [
      chunk(0, 'Boats leave at dawn.', { page: 1, headingPath: ['Harbour'] }),
      chunk(1, 'Mooring: two silver 🪙 a night — ask Zoë at the café.', { page: 0, headingPath: ['Harbour', 'Fees'] }),
      chunk(2, '', { headingPath: ['Harbour'] }),
      chunk(3, 'nul \u0000 and a lone surrogate-free tail ñ', { page: null, headingPath: [] }),
    ];
    const packed = new PackedChunks(packChunks(chunks));
    expect(packed.length).toBe(4);
    expect(Array.from({ length: 4 }, (_, i) => packed.at(i))).toEqual(chunks);
    expect(packed.contents(1, 3)).toEqual([chunks[1]!.content, '']);
    expect(packed.contents(3, 99)).toEqual([chunks[3]!.content]);
    expect(packed.ordinal(2)).toBe(2);
    expect(() => packed.at(4)).toThrow(RangeError);
  });

  it('read the same from a buffer that starts at an odd offset of a larger one', () => {
    const bytes = packChunks([chunk(0, 'ein Schiff'), chunk(1, 'zwei Schiffe', { headingPath: ['Kai'] })]);
    const shifted = new Uint8Array(bytes.length + 3);
    shifted.set(bytes, 3);
    const packed = new PackedChunks(shifted.subarray(3));
    expect(packed.at(1)).toEqual(chunk(1, 'zwei Schiffe', { headingPath: ['Kai'] }));
  });

  it('pack an empty document, and refuse a truncated buffer', () => {
    expect(new PackedChunks(packChunks([])).length).toBe(0);
    const bytes = packChunks([chunk(0, 'x'), chunk(1, 'y')]);
    expect(() => new PackedChunks(bytes.subarray(0, 12))).toThrow(/truncated/);
  });

  it('adapt a plain array to the same list', () => {
    const chunks = [chunk(0, 'a'), chunk(1, 'b')];
    const list = chunkList(chunks);
    expect([list.length, list.ordinal(1), list.at(0), list.contents(0, 2)]).toEqual([2, 1, chunks[0], ['a', 'b']]);
    expect(() => list.at(2)).toThrow(RangeError);
  });
});
