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

  /** A sentence of 8-22 words, capitalised, ending in a full stop. */
  sentence(): string {
    const length = 8 + Math.floor(this.#random() * 15);
    const parts: string[] = [];
    for (let i = 0; i < length; i++) parts.push(this.word());
    const text = parts.join(' ');
    return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
  }

  /** A paragraph of 3-7 sentences. */
  paragraph(): string {
    const count = 3 + Math.floor(this.#random() * 5);
    const parts: string[] = [];
    for (let i = 0; i < count; i++) parts.push(this.sentence());
    return parts.join(' ');
  }

  /** A title-like run of 2-5 words. */
  heading(): string {
    const count = 2 + Math.floor(this.#random() * 4);
    const parts: string[] = [];
    for (let i = 0; i < count; i++) parts.push(this.word());
    return parts.map((w) => `${w.charAt(0).toUpperCase()}${w.slice(1)}`).join(' ');
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
