// The parse task called in-thread, for what it extracts and what it refuses. The pool, its caps
// and OCR (which needs a thread of its own) are in test/e2e/parser-pool.test.ts.
import { deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readImageSize } from '../../src/documents/image-header.ts';
import { toParseResult } from '../../src/documents/parsers/parsed.ts';
import type { DocumentMimeType, ParseLimits, ParseResult, TextSection } from '../../src/documents/types.ts';
import parseDocument from '../../workers/parse-document.ts';
import {
  deflatedEntry, DOCX_SKELETON, jpegHeader, makeDocx, makePdf, makeRawPdf, makeZip, pngHeader, webpHeader,
} from '../support/document-fixtures.ts';

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const LIMITS: ParseLimits = { maxPages: 50, maxPixels: 4_000_000, maxUncompressedBytes: 10 * 2 ** 20, maxZipEntries: 100, maxTextChars: 100_000 };
const text = (s: string): Uint8Array => new TextEncoder().encode(s);

async function sections(bytes: Uint8Array, mimeType: DocumentMimeType, limits = LIMITS): Promise<TextSection[]> {
  const result = await parseDocument({ bytes, mimeType, limits });
  if (!result.ok) throw new Error(result.error);
  return result.sections;
}

async function failure(bytes: Uint8Array, mimeType: DocumentMimeType, limits = LIMITS): Promise<string> {
  const result: ParseResult = await parseDocument({ bytes, mimeType, limits });
  if (result.ok) throw new Error('expected a failure');
  return result.error;
}

describe('parse-document: formats', () => {
  it('reads a PDF page by page', async () => {
    const pdf = await makePdf([
      { heading: 'Harbour rules', paragraphs: ['No pirates may dock.'] },
      { heading: 'Fees', paragraphs: ['Ten silver a night.'] },
    ]);
    // pdf.js takes (detaches) the buffer it is given, so each parse gets its own copy.
    const result = await parseDocument({ bytes: pdf.slice(), mimeType: 'application/pdf', limits: LIMITS });
    expect(result).toMatchObject({ ok: true, pages: 2 });
    const out = await sections(pdf, 'application/pdf');
    expect(out.map((s) => s.page)).toEqual([1, 2]);
    expect(out[0]!.text).toContain('No pirates may dock.');
    expect(out[1]!.text).toContain('Ten silver a night.');
  });

  it('reads DOCX headings into heading paths', async () => {
    const docx = await makeDocx([
      { heading: 'Harbour', level: 1 }, 'Ships dock here.',
      { heading: 'Fees', level: 2 }, 'Ten silver.',
      { heading: 'Tavern', level: 1 }, 'Ale is cheap.',
    ]);
    expect(await sections(docx, DOCX)).toEqual([
      { text: 'Ships dock here.', page: null, headingPath: ['Harbour'] },
      { text: 'Ten silver.', page: null, headingPath: ['Harbour', 'Fees'] },
      { text: 'Ale is cheap.', page: null, headingPath: ['Tavern'] },
    ]);
  });

  it('reads HTML without scripts, styles or templates, with headings and paragraphs', async () => {
    const html = `<!doctype html><html><head><title>T</title><style>p{color:red}</style>
      <script>document.write('evil')</script></head><body><noscript>enable js</noscript>
      <h1>Harbour</h1><p>Ships   dock
      here.</p><div>Second &amp; last.</div><template><p>hidden</p></template>
      <h2>Fees</h2><ul><li>Ten silver</li><li>Bring a lantern</li></ul><h1>Tavern</h1><p>Ale.</p></body></html>`;
    expect(await sections(text(html), 'text/html')).toEqual([
      { text: 'Ships dock here.\n\nSecond & last.', page: null, headingPath: ['Harbour'] },
      { text: 'Ten silver\n\nBring a lantern', page: null, headingPath: ['Harbour', 'Fees'] },
      { text: 'Ale.', page: null, headingPath: ['Tavern'] },
    ]);
  });

  it('turns NUL and lone-surrogate character references into U+FFFD, so the text can be stored and indexed', async () => {
    expect(await sections(text('<h1>A&#0;b</h1><p>x&#0;y &#xD800;z</p>'), 'text/html')).toEqual([
      { text: 'x\uFFFDy \uFFFDz', page: null, headingPath: ['A\uFFFDb'] },
    ]);
  });

  it('turns a NUL that a PDF font maps a glyph to into U+FFFD, and keeps the rest of the page', async () => {
    // The font's map sends A to U+0000 (as some broken writers do) and C to A.
    const pdf = makeRawPdf(text('BT /F1 12 Tf 72 700 Td (CACBC) Tj ET'), ['<41> <0000>', '<43> <0041>']);
    const [section] = await sections(pdf, 'application/pdf');
    expect(section?.text).toContain('A\uFFFDA');
    expect(section?.text).not.toContain('\u0000');
  });

  it('makes every extracted section storable: NUL and lone surrogates become U+FFFD, in text and headings', () => {
    const result = toParseResult({ sections: [{ text: 'a\u0000b \uD800c', page: 1, headingPath: ['x\uDC00', 'y\u0000'] }] }, 'none');
    expect(result).toEqual({ ok: true, pages: null, sections: [{ text: 'a\uFFFDb \uFFFDc', page: 1, headingPath: ['x\uFFFD', 'y\uFFFD'] }] });
  });

  it('reads Markdown ATX and setext headings, and never a heading inside a code fence', async () => {
    const md = ['Intro line.', '', 'Harbour', '=======', 'Ships dock.', '', '## Fees ##', 'Ten *silver*.',
      '```sh', '# not a heading', '```', '', 'Tavern', '---', 'Ale.'].join('\n');
    expect(await sections(text(md), 'text/markdown')).toEqual([
      { text: 'Intro line.', page: null, headingPath: [] },
      { text: 'Ships dock.', page: null, headingPath: ['Harbour'] },
      { text: 'Ten *silver*.\n\n```sh\n# not a heading\n```', page: null, headingPath: ['Harbour', 'Fees'] },
      { text: 'Ale.', page: null, headingPath: ['Harbour', 'Tavern'] },
    ]);
  });

  it('reads plain text in paragraphs and keeps at most maxTextChars', async () => {
    expect(await sections(text('one\r\ntwo\n\n\nthree'), 'text/plain')).toEqual([{ text: 'one\ntwo\n\nthree', page: null, headingPath: [] }]);
    const capped = await sections(text('a'.repeat(500)), 'text/plain', { ...LIMITS, maxTextChars: 100 });
    expect(capped[0]!.text).toHaveLength(100);
  });

  it('says so when there is no text', async () => {
    expect(await failure(text('<script>x()</script>'), 'text/html')).toMatch(/no text/);
    expect(await failure(Uint8Array.of(0xc3, 0x28), 'text/plain')).toMatch(/not valid UTF-8/);
    // The sniffer reads the start: a NUL further in is refused by name, for every text format.
    for (const mimeType of ['text/plain', 'text/markdown', 'text/html'] as const) {
      expect(await failure(text(`${'Harbour notes. '.repeat(10)}a\u0000b`), mimeType)).toMatch(/NUL character \(at character 151\)/);
    }
  });
});

describe('parse-document: caps and damage', () => {
  it('reads image sizes from PNG, JPEG and WebP headers', () => {
    expect(readImageSize(pngHeader(640, 480), 'image/png')).toEqual({ width: 640, height: 480 });
    expect(readImageSize(jpegHeader(1024, 768), 'image/jpeg')).toEqual({ width: 1024, height: 768 });
    expect(readImageSize(webpHeader('VP8 ', 300, 200), 'image/webp')).toEqual({ width: 300, height: 200 });
    expect(readImageSize(webpHeader('VP8L', 16383, 16383), 'image/webp')).toEqual({ width: 16383, height: 16383 });
    expect(readImageSize(webpHeader('VP8X', 20000, 30000), 'image/webp')).toEqual({ width: 20000, height: 30000 });
    expect(readImageSize(jpegHeader(5, 5).subarray(0, 10), 'image/jpeg')).toBeNull();
  });

  it('refuses images over the pixel cap from the header alone', async () => {
    expect(await failure(pngHeader(40000, 40000), 'image/png')).toBe(
      'The image is 40000x40000 pixels; at most 4000000 pixels are read. Scale it down and upload again.',
    );
    expect(await failure(jpegHeader(5000, 5000), 'image/jpeg')).toMatch(/5000x5000 pixels/);
    expect(await failure(webpHeader('VP8X', 20000, 30000), 'image/webp')).toMatch(/20000x30000 pixels/);
    expect(await failure(pngHeader(10, 10).subarray(0, 20), 'image/png')).toMatch(/PNG image is damaged or truncated/);
  });

  it('refuses a PDF over the page cap, a truncated PDF and garbage', async () => {
    const pages = Array.from({ length: 4 }, (_, i) => ({ heading: `P${i}`, paragraphs: ['x'] }));
    const pdf = await makePdf(pages);
    expect(await failure(pdf.slice(), 'application/pdf', { ...LIMITS, maxPages: 3 })).toBe(
      'The PDF has 4 pages; at most 3 are read. Split it into smaller files and upload them.',
    );
    expect(await failure(pdf.subarray(0, Math.floor(pdf.length / 2)), 'application/pdf')).toMatch(/PDF is damaged or truncated/);
    expect(await failure(text('%PDF-1.7\nnonsense\n%%EOF'), 'application/pdf')).toMatch(/PDF is damaged or truncated/);
  });

  it('refuses a PDF whose compressed stream inflates past the cap, before pdf.js reads it', async () => {
    const bomb = makeRawPdf(new Uint8Array(64 * 2 ** 20).fill(0x20));
    expect(await failure(bomb, 'application/pdf')).toMatch(/unpacks to more than 10 MB/);
  });

  it('refuses a DOCX whose directory declares too much, too many parts, or lies about sizes', async () => {
    const big = deflatedEntry('word/document.xml', new Uint8Array(11 * 2 ** 20));
    const honest = makeZip([deflatedEntry('[Content_Types].xml', '<x/>'), big]);
    expect(await failure(honest, DOCX)).toMatch(/unpacks to 11 MB; at most 10 MB/);
    const many = makeZip([...DOCX_SKELETON, ...Array.from({ length: 120 }, (_, i) => `p${i}`)].map((n) => deflatedEntry(n, 'x')));
    expect(await failure(many, DOCX)).toMatch(/holds 122 parts; at most 100/);
    const liar = { ...big, uncompressedSize: 1000 };
    expect(await failure(makeZip([deflatedEntry('[Content_Types].xml', '<x/>'), liar]), DOCX)).toMatch(/zip bomb/);
    const broken = { ...deflatedEntry('word/document.xml', 'x'.repeat(1000)), data: deflateRawSync('x'.repeat(1000)).subarray(0, 3) };
    expect(await failure(makeZip([deflatedEntry('[Content_Types].xml', '<x/>'), broken]), DOCX)).toMatch(/DOCX file is damaged/);
  });
});
