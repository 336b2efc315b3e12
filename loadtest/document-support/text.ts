/**
 * Seeded English-like text for the documents benchmark: function words as common as in English
 * prose (the 'simple' text-search configuration keeps them, so they match nearly every chunk) and
 * a long tail of made-up content words in a Zipf distribution, so rare words match few chunks.
 * Same seed, same text: runs compare the same bytes.
 */
import { randomFillSync } from 'node:crypto';
import { Document, HeadingLevel, ImageRun, Packer, Paragraph } from 'docx';
import PDFDocument from 'pdfkit';
import { makePng } from '../../test/support/document-fixtures.ts';

/** mulberry32: small, fast, good enough for test data. Returns floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const FUNCTION_WORDS = (
  'the of and to a in that is was he for it with as his on be at by i this had not are but from or have an they which ' +
  'one you were her all she there would their we him been has when who will more no if out so said what up its about ' +
  'into than them can only other new some could time these two may then do first any my now such like our over man me ' +
  'even most made after also did many before must through back years where much your way well down should because each'
).split(' ');

const SYLLABLES = 'ka ter lo mar in ven do ris al the on gra sel bu ric an mo dun e pha tor li wen ost'.split(' ');

/** The vocabulary, most frequent first: function words, then `contentWords` made-up words. */
export function vocabulary(contentWords: number): string[] {
  const random = seededRandom(7);
  const words = new Set<string>(FUNCTION_WORDS);
  while (words.size < FUNCTION_WORDS.length + contentWords) {
    const length = 2 + Math.floor(random() * 3);
    words.add(Array.from({ length }, () => SYLLABLES[Math.floor(random() * SYLLABLES.length)]).join(''));
  }
  return [...words];
}

const capitalise = (w: string) => `${w.charAt(0).toUpperCase()}${w.slice(1)}`;

/** Draws words with probability proportional to 1 / rank (Zipf, s = 1). */
export class WordSampler {
  readonly words: string[];
  readonly #cumulative: Float64Array;
  readonly #random: () => number;
  constructor(words: string[], seed: number) {
    this.words = words;
    this.#random = seededRandom(seed);
    this.#cumulative = new Float64Array(words.length);
    let sum = 0;
    for (let i = 0; i < words.length; i++) this.#cumulative[i] = sum += 1 / (i + 1);
  }

  word(): string {
    const cumulative = this.#cumulative;
    const target = this.#random() * (cumulative[cumulative.length - 1] ?? 0);
    let [lo, hi] = [0, cumulative.length - 1];
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((cumulative[mid] ?? 0) < target) lo = mid + 1;
      else hi = mid;
    }
    return this.words[lo] ?? 'the';
  }

  #times<T>(min: number, spread: number, make: () => T): T[] {
    return Array.from({ length: min + Math.floor(this.#random() * spread) }, make);
  }

  /** A sentence of 8-22 words, capitalised, ending in a full stop. */
  sentence = (): string => `${capitalise(this.#times(8, 15, () => this.word()).join(' '))}.`;
  /** A paragraph of 3-7 sentences. */
  paragraph = (): string => this.#times(3, 5, () => this.sentence()).join(' ');
  /** A title-like run of 2-5 words. */
  heading = (): string => this.#times(2, 4, () => capitalise(this.word())).join(' ');
}

/** Paragraphs of about `chars` characters in all. */
function paragraphs(sampler: WordSampler, chars: number): string[] {
  const out: string[] = [];
  for (let size = 0; size < chars; size += out.at(-1)?.length ?? 0) out.push(sampler.paragraph());
  return out;
}

/** About `bytes` bytes of plain text (ASCII, so chars = bytes): paragraphs of seeded prose. */
export function makeTextFile(bytes: number, seed = 1): Uint8Array {
  const text = paragraphs(new WordSampler(vocabulary(20_000), seed), bytes).join('\n\n');
  return new TextEncoder().encode(text.slice(0, bytes));
}

/**
 * A greyscale PNG of noise whose side makes `count` of them about `bytes` in all: deflate cannot
 * shrink it, the way real large office files are large because of their images.
 */
function noisePng(bytes: number, count: number): Buffer {
  const side = Math.floor(Math.sqrt(bytes / count) * 0.97);
  return Buffer.from(makePng(side, side, randomFillSync(new Uint8Array(side * side))));
}

/** About `bytes` of PDF: `pages` pages, each with text and one noise image. */
export async function makeBulkPdf(bytes: number, pages: number, seed = 4): Promise<Uint8Array> {
  const sampler = new WordSampler(vocabulary(20_000), seed);
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve) => doc.on('end', () => resolve()));
  for (let page = 0; page < pages; page++) {
    doc.addPage();
    doc.fontSize(18).text(sampler.heading());
    doc.image(noisePng(bytes, pages), { fit: [200, 150] });
    for (const paragraph of paragraphs(sampler, 1_800)) doc.fontSize(10).text(paragraph);
  }
  doc.end();
  await ended;
  return new Uint8Array(Buffer.concat(chunks));
}

/** About `bytes` of DOCX: `sections` headings, each with text and one noise image. */
export async function makeBulkDocx(bytes: number, sections: number, seed = 5): Promise<Uint8Array> {
  const sampler = new WordSampler(vocabulary(20_000), seed);
  const children: Paragraph[] = [];
  for (let s = 0; s < sections; s++) {
    children.push(new Paragraph({ text: sampler.heading(), heading: HeadingLevel.HEADING_1 }));
    const image = new ImageRun({ type: 'png', data: noisePng(bytes, sections), transformation: { width: 200, height: 200 } });
    children.push(new Paragraph({ children: [image] }));
    for (const paragraph of paragraphs(sampler, 3_000)) children.push(new Paragraph({ text: paragraph }));
  }
  return new Uint8Array(await Packer.toBuffer(new Document({ sections: [{ children }] })));
}
