import type { TextSection } from './types.ts';

export interface Chunk {
  ordinal: number;          // 0-based position in the document
  content: string;
  tokenCount: number;       // same estimate as conversation history (about 4 characters a token)
  page: number | null;      // page of the chunk's start
  headingPath: string[];
  startOffset: number;      // character offsets in the concatenated text of all sections
  endOffset: number;
}

export interface ChunkOptions {
  maxTokens: number;
  overlapTokens: number;
}

/** The same estimate as conversation history (src/conversations/history.ts). */
const CHARS_PER_TOKEN = 4;

/**
 * What joins sections in "the concatenated text" that offsets count in, so that for every chunk
 * `content === sections.map((s) => s.text).join(SECTION_SEPARATOR).slice(startOffset, endOffset)`.
 * A blank line: a section boundary (a PDF page, a heading) reads as a paragraph break.
 */
export const SECTION_SEPARATOR = '\n\n';

interface Span {
  start: number;
  end: number;
}

interface Placed {
  section: TextSection;
  start: number;
  end: number;
}

/**
 * Structure-following split, coarsest first: paragraphs, then sentences (or lines), then words.
 * A piece that still does not fit is cut at the next level; a single word longer than a chunk is
 * cut at the size limit.
 */
const LEVELS: readonly RegExp[] = [
  /\n[ \t]*\n\s*/g,
  /(?<=[.!?…]["'”’)\]]*)\s+|\s*\n\s*/g,
  /\s+/g,
];

const SENTENCE_END = /[.!?…]["'”’)\]]*\s+$/;

/**
 * Splits parsed sections into token-sized chunks that follow the document's structure: a chunk
 * never mixes two heading paths, breaks fall at paragraphs before sentences before words, and
 * consecutive chunks of one heading path overlap by about `overlapTokens`.
 */
export function chunkSections(sections: TextSection[], options: ChunkOptions): Chunk[] {
  if (!Number.isInteger(options.maxTokens) || options.maxTokens < 1) throw new RangeError('maxTokens must be a positive integer');
  if (!Number.isInteger(options.overlapTokens) || options.overlapTokens < 0) throw new RangeError('overlapTokens must be a non-negative integer');
  const maxChars = options.maxTokens * CHARS_PER_TOKEN;
  // At most half a chunk, so every chunk still brings mostly new text.
  const overlapChars = Math.min(options.overlapTokens * CHARS_PER_TOKEN, Math.floor(maxChars / 2));
  const text = sections.map((s) => s.text).join(SECTION_SEPARATOR);

  const chunks: Chunk[] = [];
  for (const block of headingBlocks(place(sections))) {
    const units = block.flatMap((p) => split(text, { start: p.start, end: p.end }, maxChars, 0));
    for (const span of pack(text, units, maxChars, overlapChars)) {
      const content = text.slice(span.start, span.end);
      chunks.push({
        ordinal: chunks.length,
        content,
        tokenCount: Math.ceil(content.length / CHARS_PER_TOKEN),
        page: block.find((p) => span.start < p.end)?.section.page ?? null,
        headingPath: [...(block[0]?.section.headingPath ?? [])],
        startOffset: span.start,
        endOffset: span.end,
      });
    }
  }
  return chunks;
}

function place(sections: TextSection[]): Placed[] {
  let offset = 0;
  return sections.map((section) => {
    const placed = { section, start: offset, end: offset + section.text.length };
    offset = placed.end + SECTION_SEPARATOR.length;
    return placed;
  });
}

/** Runs of consecutive sections under the same headings (e.g. the pages of one chapter). */
function headingBlocks(placed: Placed[]): Placed[][] {
  const blocks: Placed[][] = [];
  let current: Placed[] = [];
  for (const p of placed) {
    const previous = current[0];
    if (previous && !samePath(previous.section.headingPath, p.section.headingPath)) {
      blocks.push(current);
      current = [];
    }
    current.push(p);
  }
  if (current.length > 0) blocks.push(current);
  return blocks;
}

function samePath(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((heading, i) => heading === b[i]);
}

/** Trimmed, non-empty pieces of `range`, each at most `maxChars` long, in order. */
function split(text: string, range: Span, maxChars: number, level: number): Span[] {
  const separator = LEVELS[level];
  if (!separator) return hardSplit(range, maxChars);
  const pieces: Span[] = [];
  const slice = text.slice(range.start, range.end);
  let from = 0;
  for (const match of slice.matchAll(separator)) {
    pieces.push({ start: range.start + from, end: range.start + match.index });
    from = match.index + match[0].length;
  }
  pieces.push({ start: range.start + from, end: range.end });
  return pieces.flatMap((piece) => {
    const trimmed = trim(text, piece);
    if (trimmed.end <= trimmed.start) return [];
    return trimmed.end - trimmed.start <= maxChars ? [trimmed] : split(text, trimmed, maxChars, level + 1);
  });
}

function hardSplit(range: Span, maxChars: number): Span[] {
  const pieces: Span[] = [];
  for (let start = range.start; start < range.end; start += maxChars) {
    pieces.push({ start, end: Math.min(start + maxChars, range.end) });
  }
  return pieces;
}

function trim(text: string, span: Span): Span {
  let { start, end } = span;
  while (start < end && isSpace(text, start)) start++;
  while (end > start && isSpace(text, end - 1)) end--;
  return { start, end };
}

function isSpace(text: string, at: number): boolean {
  return /\s/.test(text.charAt(at));
}

/**
 * Greedily fills chunks with whole units. Each chunk after the first starts back inside the
 * previous one, at a sentence start if the overlap window has one, else at a word start.
 */
function pack(text: string, units: Span[], maxChars: number, overlapChars: number): Span[] {
  const chunks: Span[] = [];
  let i = 0;
  while (i < units.length) {
    const first = units[i] as Span;
    const previous = chunks.at(-1);
    let start = first.start;
    if (previous && overlapChars > 0) {
      const lowest = Math.max(previous.end - overlapChars, first.end - maxChars, previous.start);
      start = overlapStart(text, lowest, first.start) ?? first.start;
    }
    let end = first.end;
    for (i++; i < units.length && (units[i] as Span).end - start <= maxChars; i++) end = (units[i] as Span).end;
    chunks.push({ start, end });
  }
  return chunks;
}

function overlapStart(text: string, lowest: number, limit: number): number | undefined {
  let word: number | undefined;
  for (let at = Math.max(lowest, 0); at < limit; at++) {
    if (isSpace(text, at) || (at > 0 && !isSpace(text, at - 1))) continue;
    if (SENTENCE_END.test(text.slice(Math.max(0, at - 8), at))) return at;
    word ??= at;
  }
  return word;
}
