// The real pool: worker threads loading workers/parse-document.ts, with the memory and time caps.
// Hostile files must come back as {ok:false} while the main thread keeps turning its event loop.
import { deflateRawSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ParseLimits, ParseResult } from '../../src/documents/types.ts';
import { ParserPool } from '../../workers/parser-pool.ts';
import { deflatedEntry, makeDocx, makePdf, makeRawPdf, makeZip, pngHeader, renderTextPng } from '../support/document-fixtures.ts';

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const LIMITS: ParseLimits = { maxPages: 300, maxPixels: 25_000_000, maxUncompressedBytes: 64 * 2 ** 20, maxZipEntries: 1000, maxTextChars: 64 * 2 ** 20 };

/** Runs `work` while counting event-loop turns of this thread: more than zero means it was never blocked. */
async function withTurns<T>(work: Promise<T>): Promise<{ result: T; turns: number }> {
  let done = false;
  let turns = 0;
  const tracked = work.finally(() => {
    done = true;
  });
  const spin = async (): Promise<void> => {
    while (!done) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      turns++;
    }
  };
  const [result] = await Promise.all([tracked, spin()]);
  return { result, turns };
}

function errorOf(result: ParseResult): string {
  if (result.ok) throw new Error('expected a failure');
  return result.error;
}

describe('ParserPool', () => {
  let pool: ParserPool;
  beforeAll(() => {
    pool = new ParserPool({ maxThreads: 2, maxMemoryMb: 256, timeoutMs: 30_000, limits: LIMITS });
  });
  afterAll(async () => {
    await pool.close();
  });

  it('parses a 200-page PDF in a worker, keeping page numbers', async () => {
    const pages = Array.from({ length: 200 }, (_, i) => ({
      heading: `Chapter ${i + 1}`,
      paragraphs: [`The ledger of page ${i + 1} lists the ships that docked.`],
    }));
    const result = await pool.parse(await makePdf(pages), 'application/pdf');
    if (!result.ok) throw new Error(result.error);
    expect(result.pages).toBe(200);
    expect(result.sections.at(-1)).toMatchObject({ page: 200 });
    expect(result.sections.at(-1)!.text).toContain('The ledger of page 200');
  });

  it('parses and chunks in the worker, sending back only the chunks', async () => {
    const markdown = ['# Harbour', '', 'Boats leave at dawn.', '', '## Fees', '', 'Mooring costs two silver a night.'].join('\n');
    const result = await pool.extract(new TextEncoder().encode(markdown), 'text/markdown', { maxTokens: 100, overlapTokens: 10 });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    // Packed in one transferred buffer; each chunk is decoded when read.
    const chunks = Array.from({ length: result.chunks.length }, (_, i) => result.chunks.at(i));
    expect(chunks.map((c) => [c.headingPath, c.content])).toEqual([
      [['Harbour'], expect.stringContaining('Boats leave at dawn.')],
      [['Harbour', 'Fees'], expect.stringContaining('Mooring costs two silver a night.')],
    ]);
    expect(await pool.extract(new Uint8Array([0xff, 0xfe, 0x00]), 'text/plain', { maxTokens: 100, overlapTokens: 10 })).toMatchObject({ ok: false });
  });

  it('parses a DOCX and reads a PNG by OCR, offline', async () => {
    const docx = await pool.parse(await makeDocx([{ heading: 'Harbour', level: 1 }, 'Ships dock here.']), DOCX);
    expect(docx).toEqual({ ok: true, pages: null, sections: [{ text: 'Ships dock here.', page: null, headingPath: ['Harbour'] }] });
    const ocr = await pool.parse(renderTextPng('HOTEL ROUTE'), 'image/png');
    if (!ocr.ok) throw new Error(ocr.error);
    expect(ocr.sections.map((s) => s.text).join(' ')).toContain('HOTEL');
  });

  it('transfers whole buffers to the worker and copies slices of shared ones', async () => {
    const whole = new TextEncoder().encode('moved, not copied');
    expect((await pool.parse(whole, 'text/plain')).ok).toBe(true);
    expect(whole.byteLength).toBe(0);
    const pooled = Buffer.from('a slice of a shared pool');
    expect((await pool.parse(pooled, 'text/plain')).ok).toBe(true);
    expect(pooled.toString()).toBe('a slice of a shared pool');
  });

  it('refuses a DOCX zip bomb (300 MB of zeros declared as 1 KB) while the main thread keeps running', async () => {
    const lying = { name: 'word/document.xml', data: deflateRawSync(new Uint8Array(300 * 2 ** 20)), deflated: true, uncompressedSize: 1024 };
    const bomb = makeZip([deflatedEntry('[Content_Types].xml', '<Types/>'), lying]);
    const { result, turns } = await withTurns(pool.parse(bomb, DOCX));
    expect(errorOf(result)).toMatch(/zip bomb/);
    expect(turns).toBeGreaterThan(0);
  });

  it('refuses a PDF whose content stream inflates to 300 MB while the main thread keeps running', async () => {
    const body = new Uint8Array(300 * 2 ** 20).fill(0x20);
    body.set(new TextEncoder().encode('BT /F1 12 Tf 72 700 Td (bomb) Tj ET\n'));
    const { result, turns } = await withTurns(pool.parse(makeRawPdf(body), 'application/pdf'));
    expect(errorOf(result)).toMatch(/unpacks to more than 64 MB/);
    expect(turns).toBeGreaterThan(0);
  });

  it('refuses a PNG whose header claims 40000x40000 pixels, and truncated files', async () => {
    expect(errorOf(await pool.parse(pngHeader(40000, 40000), 'image/png'))).toMatch(/40000x40000 pixels; at most 25000000/);
    const png = renderTextPng('HOTEL');
    expect(errorOf(await pool.parse(png.subarray(0, 16), 'image/png'))).toMatch(/damaged or truncated/);
    const pdf = await makePdf([{ heading: 'x', paragraphs: ['y'] }]);
    expect(errorOf(await pool.parse(pdf.subarray(0, pdf.length - 200), 'application/pdf'))).toMatch(/damaged or truncated/);
    const docx = await makeDocx(['Hello']);
    expect(errorOf(await pool.parse(docx.subarray(0, docx.length - 30), DOCX))).toMatch(/damaged or truncated/);
  });

  it('answers a cancelled parse without throwing', async () => {
    const controller = new AbortController();
    controller.abort();
    expect(errorOf(await pool.parse(new TextEncoder().encode('x'), 'text/plain', controller.signal))).toMatch(/cancelled/);
  });
});

describe('ParserPool caps', () => {
  it('stops a task over its deadline, then serves the next one with a fresh worker', async () => {
    const pool = new ParserPool({ maxThreads: 1, maxMemoryMb: 256, timeoutMs: 500, limits: LIMITS });
    try {
      // OCR of a 3-megapixel page of text takes seconds (loading the engine alone takes about
      // one), whatever the machine; a fresh worker reading text takes milliseconds.
      const slow = renderTextPng('HOTEL ROUTE '.repeat(25).trim(), 10);
      const { result, turns } = await withTurns(pool.parse(slow, 'image/png'));
      expect(errorOf(result)).toMatch(/took too long/);
      expect(turns).toBeGreaterThan(0);
      expect(await pool.parse(new TextEncoder().encode('still here'), 'text/plain')).toMatchObject({ ok: true });
    } finally {
      await pool.close();
    }
  });

  it('stops a task over the heap cap, then serves the next one with a fresh worker', async () => {
    const pool = new ParserPool({ maxThreads: 1, maxMemoryMb: 32, timeoutMs: 30_000, limits: LIMITS });
    try {
      const docx = await makeDocx(Array.from({ length: 40_000 }, (_, i) => `Paragraph ${i}, long enough to cost the DOM some memory.`));
      const { result, turns } = await withTurns(pool.parse(docx, DOCX));
      expect(errorOf(result)).toMatch(/needed more memory than allowed/);
      expect(turns).toBeGreaterThan(0);
      expect(await pool.parse(new TextEncoder().encode('still here'), 'text/plain')).toMatchObject({ ok: true });
    } finally {
      await pool.close();
    }
  });
});
