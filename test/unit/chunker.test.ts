import { describe, expect, it } from 'vitest';
import { chunkSections, SECTION_SEPARATOR, type Chunk } from '../../src/documents/chunker.ts';
import type { TextSection } from '../../src/documents/types.ts';

const section = (text: string, headingPath: string[] = [], page: number | null = null): TextSection => ({ text, page, headingPath });

/** Sentences of 8 words (about 48 characters) each, numbered so every one is distinct. */
function sentences(count: number, from = 0): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${from + i} talks about the harbour.`).join(' ');
}

function expectWellFormed(sections: TextSection[], chunks: Chunk[], maxTokens: number): void {
  const text = sections.map((s) => s.text).join(SECTION_SEPARATOR);
  chunks.forEach((chunk, i) => {
    expect(chunk.ordinal).toBe(i);
    expect(chunk.content).toBe(text.slice(chunk.startOffset, chunk.endOffset));
    expect(chunk.content).toBe(chunk.content.trim());
    expect(chunk.content.length).toBeGreaterThan(0);
    expect(chunk.tokenCount).toBe(Math.ceil(chunk.content.length / 4));
    expect(chunk.tokenCount).toBeLessThanOrEqual(maxTokens);
  });
}

describe('chunkSections', () => {
  it('keeps a short document in one chunk with its offsets, page and headings', () => {
    const sections = [section('  Rook hates pirates.  ', ['Harbour', 'People'], 3)];
    const chunks = chunkSections(sections, { maxTokens: 100, overlapTokens: 10 });
    expect(chunks).toEqual([
      { ordinal: 0, content: 'Rook hates pirates.', tokenCount: 5, page: 3, headingPath: ['Harbour', 'People'], startOffset: 2, endOffset: 21 },
    ]);
  });

  it('returns nothing for empty or blank sections', () => {
    expect(chunkSections([], { maxTokens: 50, overlapTokens: 5 })).toEqual([]);
    expect(chunkSections([section(''), section(' \n\n\t ')], { maxTokens: 50, overlapTokens: 5 })).toEqual([]);
  });

  it('never mixes two heading paths in one chunk, and counts offsets across sections', () => {
    const sections = [section('Intro text.', ['A']), section('Body text.', ['A', 'B']), section('Outro text.', ['C'])];
    const chunks = chunkSections(sections, { maxTokens: 100, overlapTokens: 10 });
    expect(chunks.map((c) => [c.content, c.headingPath])).toEqual([
      ['Intro text.', ['A']],
      ['Body text.', ['A', 'B']],
      ['Outro text.', ['C']],
    ]);
    expectWellFormed(sections, chunks, 100);
    expect(chunks[1]?.startOffset).toBe('Intro text.'.length + SECTION_SEPARATOR.length);
  });

  it('joins consecutive pages under the same headings and gives each chunk the page it starts on', () => {
    const sections = [1, 2, 3].map((page) => section(sentences(3, page * 10), ['Chapter 1'], page));
    const chunks = chunkSections(sections, { maxTokens: 80, overlapTokens: 0 });
    expectWellFormed(sections, chunks, 80);
    expect(chunks).toHaveLength(2);
    for (const chunk of chunks) {
      const firstSentence = Number(/Sentence number (\d+)/.exec(chunk.content)?.[1]);
      expect(chunk.page).toBe(Math.floor(firstSentence / 10));
    }
    expect(chunks.some((c) => c.content.includes('Sentence number 12') && c.content.includes('Sentence number 20'))).toBe(true);
  });

  it('breaks at paragraphs when whole paragraphs fit', () => {
    const paragraphs = [sentences(2, 0), sentences(2, 2), sentences(2, 4), sentences(2, 6)];
    const sections = [section(paragraphs.join('\n\n'))];
    const chunks = chunkSections(sections, { maxTokens: 50, overlapTokens: 0 });
    expectWellFormed(sections, chunks, 50);
    expect(chunks.map((c) => c.content)).toEqual([`${paragraphs[0]}\n\n${paragraphs[1]}`, `${paragraphs[2]}\n\n${paragraphs[3]}`]);
  });

  it('splits a paragraph too long for one chunk at sentences', () => {
    const sections = [section(sentences(20))];
    const chunks = chunkSections(sections, { maxTokens: 40, overlapTokens: 0 });
    expectWellFormed(sections, chunks, 40);
    expect(chunks.length).toBeGreaterThan(5);
    for (const chunk of chunks) {
      expect(chunk.content).toMatch(/^Sentence number \d+/);
      expect(chunk.content).toMatch(/harbour\.$/);
    }
  });

  it('splits a sentence too long for one chunk at words, and a word too long at the size limit', () => {
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const long = 'x'.repeat(50);
    const sections = [section(`${words} ${long}`)];
    const chunks = chunkSections(sections, { maxTokens: 5, overlapTokens: 0 });
    expectWellFormed(sections, chunks, 5);
    const all = chunks.map((c) => c.content).join(' ');
    expect(all.split(' ').filter((w) => w.startsWith('word'))).toEqual(words.split(' '));
    expect(chunks.filter((c) => c.content.startsWith('x')).map((c) => c.content.length)).toEqual([20, 20, 10]);
  });

  it('overlaps consecutive chunks by about overlapTokens, starting at a sentence when it can', () => {
    const sections = [section(sentences(30), ['Tides'])];
    const chunks = chunkSections(sections, { maxTokens: 50, overlapTokens: 15 });
    expectWellFormed(sections, chunks, 50);
    expect(chunks.length).toBeGreaterThan(3);
    for (let i = 1; i < chunks.length; i++) {
      const previous = chunks[i - 1] as Chunk;
      const chunk = chunks[i] as Chunk;
      const overlap = previous.endOffset - chunk.startOffset;
      expect(overlap).toBeGreaterThan(0);
      expect(overlap).toBeLessThanOrEqual(15 * 4);
      expect(chunk.startOffset).toBeGreaterThan(previous.startOffset);
      expect(chunk.content).toMatch(/^Sentence number \d+/);
    }
  });

  it('does not overlap across heading paths', () => {
    const sections = [section(sentences(10), ['One']), section(sentences(10, 10), ['Two'])];
    const chunks = chunkSections(sections, { maxTokens: 40, overlapTokens: 10 });
    expectWellFormed(sections, chunks, 40);
    const firstOfTwo = chunks.findIndex((c) => c.headingPath[0] === 'Two');
    expect(chunks[firstOfTwo]?.content).toMatch(/^Sentence number 10 /);
    expect(chunks[firstOfTwo]?.startOffset).toBeGreaterThan(chunks[firstOfTwo - 1]?.endOffset ?? Infinity);
  });

  it('rejects sizes that cannot make chunks', () => {
    expect(() => chunkSections([section('a')], { maxTokens: 0, overlapTokens: 0 })).toThrow(RangeError);
    expect(() => chunkSections([section('a')], { maxTokens: 10, overlapTokens: -1 })).toThrow(RangeError);
  });
});
