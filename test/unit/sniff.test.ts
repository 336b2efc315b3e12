import { describe, expect, it } from 'vitest';
import { detectDocumentType } from '../../src/documents/sniff.ts';
import {
  deflatedEntry, DOCX_SKELETON, jpegHeader, makeDocx, makePdf, makeZip, pngHeader, renderTextPng, webpHeader,
} from '../support/document-fixtures.ts';

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const text = (s: string): Uint8Array => new TextEncoder().encode(s);

function refused(result: ReturnType<typeof detectDocumentType>): string {
  if (result.ok) throw new Error(`expected a refusal, got ${result.mimeType}`);
  expect(result.status).toBe(415);
  return result.message;
}

describe('detectDocumentType: accepted files', () => {
  it('recognises PDF, DOCX and images from their bytes whatever the name', async () => {
    const pdf = await makePdf([{ heading: 'Rules', paragraphs: ['No pirates.'] }]);
    expect(detectDocumentType(pdf, undefined, 'upload.bin')).toEqual({ ok: true, mimeType: 'application/pdf' });
    expect(detectDocumentType(await makeDocx(['Hello']), 'application/octet-stream', 'x')).toEqual({ ok: true, mimeType: DOCX });
    expect(detectDocumentType(renderTextPng('HOTEL'), 'image/png', 'a.png')).toEqual({ ok: true, mimeType: 'image/png' });
    expect(detectDocumentType(jpegHeader(10, 10), 'image/jpg', 'a.jpg')).toEqual({ ok: true, mimeType: 'image/jpeg' });
    for (const kind of ['VP8 ', 'VP8L', 'VP8X'] as const) {
      expect(detectDocumentType(webpHeader(kind, 10, 10), undefined, 'a.webp')).toEqual({ ok: true, mimeType: 'image/webp' });
    }
  });

  it('tells plain text, Markdown and HTML apart by declaration, name, then markup', () => {
    expect(detectDocumentType(text('just words'), undefined, 'notes.txt')).toEqual({ ok: true, mimeType: 'text/plain' });
    expect(detectDocumentType(text('# Title'), 'text/markdown; charset=utf-8', 'x')).toEqual({ ok: true, mimeType: 'text/markdown' });
    expect(detectDocumentType(text('# Title'), 'text/plain', 'README.md')).toEqual({ ok: true, mimeType: 'text/markdown' });
    expect(detectDocumentType(text('<!DOCTYPE html><p>hi'), 'text/plain', 'page.txt')).toEqual({ ok: true, mimeType: 'text/html' });
    expect(detectDocumentType(text('<p>fragment</p>'), 'text/html', 'x')).toEqual({ ok: true, mimeType: 'text/html' });
    expect(detectDocumentType(text('\uFEFFcafé ☕\r\n'), undefined, 'x')).toEqual({ ok: true, mimeType: 'text/plain' });
  });
});

describe('detectDocumentType: refused files', () => {
  it('refuses an empty file', () => {
    expect(refused(detectDocumentType(new Uint8Array(0), 'text/plain', 'a.txt'))).toMatch(/The file is empty/);
  });

  it('refuses an SVG named .png and declared image/png: the bytes are text', () => {
    const svg = text('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
    expect(refused(detectDocumentType(svg, 'image/png', 'cat.png'))).toMatch(/sent as a PNG image but contains text/);
  });

  it('refuses a declared type the bytes contradict, naming both', async () => {
    const pdf = await makePdf([{ heading: 'x', paragraphs: ['y'] }]);
    expect(refused(detectDocumentType(pdf, 'image/png', 'a.png'))).toMatch(/sent as a PNG image but contains a PDF/);
    expect(refused(detectDocumentType(renderTextPng('HOTEL'), 'image/jpeg', 'a.jpg'))).toMatch(/JPEG image but contains a PNG/);
    expect(refused(detectDocumentType(pdf, 'text/plain', 'a.txt'))).toMatch(/sent as text\/plain but contains a PDF/);
    expect(refused(detectDocumentType(text('plain'), DOCX, 'a.docx'))).toMatch(/Word document \(DOCX\) but contains text/);
  });

  it('refuses a PDF+ZIP polyglot as ambiguous', async () => {
    const pdf = await makePdf([{ heading: 'x', paragraphs: ['y'] }]);
    const zip = makeZip(DOCX_SKELETON.map((name) => deflatedEntry(name, '<x/>')));
    // A ZIP's offsets are relative to its own start, so appended to a PDF its directory must be rebased to be read.
    const polyglot = new Uint8Array([...pdf, ...zip]);
    const eocd = new DataView(polyglot.buffer, polyglot.length - 22);
    eocd.setUint32(16, eocd.getUint32(16, true) + pdf.length, true);
    expect(refused(detectDocumentType(polyglot, 'application/pdf', 'a.pdf'))).toMatch(/both a PDF and a ZIP/);
  });

  it('refuses a ZIP that is not a Word document, and a truncated DOCX', async () => {
    const zip = makeZip([deflatedEntry('photo.txt', 'x')]);
    expect(refused(detectDocumentType(zip, 'application/zip', 'a.zip'))).toMatch(/ZIP archive but not a Word document.*Accepted types/);
    const docx = await makeDocx(['Hello']);
    expect(refused(detectDocumentType(docx.subarray(0, docx.length - 40), DOCX, 'a.docx'))).toMatch(/damaged or truncated/);
  });

  it('refuses bytes that are neither a known format nor UTF-8 text, listing what is accepted', () => {
    expect(refused(detectDocumentType(Uint8Array.of(0x00, 0x01, 0x02, 0xfe), undefined, 'a.bin'))).toMatch(/Accepted types: PDF, DOCX/);
    expect(refused(detectDocumentType(Uint8Array.of(0xc3, 0x28), undefined, 'a.txt'))).toMatch(/could not be recognised/);
    expect(refused(detectDocumentType(text('GIF89a'), 'image/gif', 'a.gif'))).toMatch(/contains text/);
  });

  it('still sniffs a truncated PNG as PNG (the parser reports the damage)', () => {
    expect(detectDocumentType(pngHeader(10, 10).subarray(0, 12), 'image/png', 'a.png')).toEqual({ ok: true, mimeType: 'image/png' });
  });

  it('judges text by its first 64 KiB, so a 50 MB upload is not scanned on the main thread', () => {
    const long = new Uint8Array(200 * 1024).fill(0x61);
    // A two-byte character cut by the 64 KiB boundary is not mistaken for invalid UTF-8.
    long.set([0xc3, 0xa9], 64 * 1024 - 1);
    expect(detectDocumentType(long, 'text/plain', 'a.txt')).toEqual({ ok: true, mimeType: 'text/plain' });
    // Bytes past the prefix are the parse worker's to check (it decodes strictly).
    long.set([0xff, 0x00], 150 * 1024);
    expect(detectDocumentType(long, 'text/plain', 'a.txt')).toEqual({ ok: true, mimeType: 'text/plain' });
    long.set([0x00], 10);
    expect(detectDocumentType(long, 'text/plain', 'a.txt').ok).toBe(false);
  });
});
