import { randomFillSync } from 'node:crypto';
import { Document, HeadingLevel, ImageRun, Packer, Paragraph } from 'docx';
import PDFDocument from 'pdfkit';
import { makePng } from '../../test/support/document-fixtures.ts';

/**
 * Seeded English-like text for the documents benchmark: function words as common as in English
 * prose (the 'simple' text-search configuration keeps them, so they match nearly every chunk) and
 * a long tail of made-up content words in a Zipf distribution, so rare words match few chunks.
 * Same seed, same text: runs compare the same bytes.
 */

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

const SYLLABLES = ['ka', 'ter', 'lo', 'mar', 'in', 'ven', 'do', 'ris', 'al', 'the', 'on', 'gra', 'sel', 'bu', 'ric', 'an', 'mo', 'dun', 'e', 'pha', 'tor', 'li', 'wen', 'ost'];

/** The vocabulary, most frequent first: function words, then `contentWords` made-up words. */
export function vocabulary(contentWords: number): string[] {
  const random = seededRandom(7);
  const seen = new Set<string>(FUNCTION_WORDS);
  const words = [...FUNCTION_WORDS];
  while (words.length < FUNCTION_WORDS.length + contentWords) {
    const length = 2 + Math.floor(random() * 3);
    let word = '';
    for (let i = 0; i < length; i++) word += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
    if (!seen.has(word)) {
      seen.add(word);
      words.push(word);
    }
  }
  return words;
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

  random(): number {
    return this.#random();
  }

  word(): string {
    const cumulative = this.#cumulative;
    const target = this.#random() * (cumulative[cumulative.length - 1] ?? 0);
    let lo = 0;
    let hi = cumulative.length - 1;
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
  sentence(): string {
    const text = this.#times(8, 15, () => this.word()).join(' ');
    return `${capitalise(text)}.`;
  }

  /** A paragraph of 3-7 sentences. */
  paragraph(): string {
    return this.#times(3, 5, () => this.sentence()).join(' ');
  }

  /** A title-like run of 2-5 words. */
  heading(): string {
    return this.#times(2, 4, () => capitalise(this.word())).join(' ');
  }
}

/** About `bytes` bytes of plain text (ASCII, so chars = bytes): paragraphs of seeded prose. */
export function makeTextFile(bytes: number, seed = 1): Uint8Array {
  const text = paragraphs(new WordSampler(vocabulary(20_000), seed), bytes).join('\n\n');
  return new TextEncoder().encode(text.slice(0, bytes));
}

/** Paragraphs of about `chars` characters in all, for PDF pages and DOCX bodies. */
export function paragraphs(sampler: WordSampler, chars: number): string[] {
  const out: string[] = [];
  let size = 0;
  while (size < chars) {
    const p = sampler.paragraph();
    out.push(p);
    size += p.length;
  }
  return out;
}

/** ~50 MB PDF and DOCX: the bulk is one incompressible noise image per page or section, the way real large office files are large. */
/** A greyscale PNG of noise, `side` x `side`: deflate cannot shrink it, so it costs about side² bytes. */
function noisePng(side: number): Uint8Array {
  return makePng(side, side, randomFillSync(new Uint8Array(side * side)));
}

/** Pages needed so that `pages` images of `side`² bytes plus text reach `bytes`. */
function imageSide(bytes: number, pages: number): number {
  return Math.floor(Math.sqrt(bytes / pages) * 0.97);
}

/** About `bytes` of PDF: `pages` pages, each with text and one noise image. */
export async function makeBulkPdf(bytes: number, pages: number, seed = 4): Promise<Uint8Array> {
  const sampler = new WordSampler(vocabulary(20_000), seed);
  const side = imageSide(bytes, pages);
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve) => doc.on('end', () => resolve()));
  for (let page = 0; page < pages; page++) {
    doc.addPage();
    doc.fontSize(18).text(sampler.heading());
    doc.image(Buffer.from(noisePng(side)), { fit: [200, 150] });
    for (const paragraph of paragraphs(sampler, 1_800)) doc.fontSize(10).text(paragraph);
  }
  doc.end();
  await ended;
  return new Uint8Array(Buffer.concat(chunks));
}

/** About `bytes` of DOCX: `sections` headings, each with text and one noise image. */
export async function makeBulkDocx(bytes: number, sections: number, seed = 5): Promise<Uint8Array> {
  const sampler = new WordSampler(vocabulary(20_000), seed);
  const side = imageSide(bytes, sections);
  const children: Paragraph[] = [];
  for (let s = 0; s < sections; s++) {
    children.push(new Paragraph({ text: sampler.heading(), heading: HeadingLevel.HEADING_1 }));
    children.push(new Paragraph({ children: [new ImageRun({ type: 'png', data: Buffer.from(noisePng(side)), transformation: { width: 200, height: 200 } })] }));
    for (const paragraph of paragraphs(sampler, 3_000)) children.push(new Paragraph({ text: paragraph }));
  }
  return new Uint8Array(await Packer.toBuffer(new Document({ sections: [{ children }] })));
}
