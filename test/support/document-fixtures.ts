// Generators for document fixtures: real files made by pdfkit and docx, and hand-built bytes
// (ZIP, PDF, PNG, JPEG and WebP headers) for the hostile cases no library would write.
import { crc32, deflateRawSync, deflateSync } from 'node:zlib';
import { Document, HeadingLevel, Packer, Paragraph } from 'docx';
import PDFDocument from 'pdfkit';

export interface FixturePage {
  heading: string;
  paragraphs: string[];
}

export async function makePdf(pages: FixturePage[]): Promise<Uint8Array> {
  const doc = new PDFDocument({ autoFirstPage: false, compress: true });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve) => doc.on('end', () => resolve()));
  for (const page of pages) {
    doc.addPage();
    doc.fontSize(20).text(page.heading);
    doc.moveDown();
    for (const paragraph of page.paragraphs) doc.fontSize(11).text(paragraph).moveDown();
  }
  doc.end();
  await ended;
  return new Uint8Array(Buffer.concat(chunks));
}

export async function makeDocx(blocks: ({ heading: string; level: 1 | 2 } | string)[]): Promise<Uint8Array> {
  const children = blocks.map((b) =>
    typeof b === 'string'
      ? new Paragraph({ text: b })
      : new Paragraph({ text: b.heading, heading: b.level === 1 ? HeadingLevel.HEADING_1 : HeadingLevel.HEADING_2 }),
  );
  return new Uint8Array(await Packer.toBuffer(new Document({ sections: [{ children }] })));
}

export interface ZipFixtureEntry {
  name: string;
  /** Stored as given: already deflated when `deflated` is true. */
  data: Uint8Array;
  deflated?: boolean;
  /** What the directory claims the entry inflates to (a bomb may lie). */
  uncompressedSize: number;
  crc?: number;
}

/** A ZIP written field by field, so tests control every size the central directory declares. */
export function makeZip(entries: ZipFixtureEntry[]): Uint8Array {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name);
    const method = entry.deflated ? 8 : 0;
    const crc = entry.crc ?? 0;
    // Both headers hold method, CRC, sizes and name length in the same order, at `at`.
    const common = (header: Buffer, at: number): Buffer => {
      header.writeUInt16LE(method, at);
      header.writeUInt32LE(crc, at + 6);
      header.writeUInt32LE(entry.data.length, at + 10);
      header.writeUInt32LE(entry.uncompressedSize, at + 14);
      header.writeUInt16LE(name.length, at + 18);
      return header;
    };
    const local = common(Buffer.alloc(30), 8);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    const central = common(Buffer.alloc(46), 10);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt32LE(0x00140014, 4); // version made by and needed: 2.0
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, Buffer.from(entry.data));
    centrals.push(central, name);
    offset += 30 + name.length + entry.data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return new Uint8Array(Buffer.concat([...locals, directory, end]));
}

export function deflatedEntry(name: string, content: Uint8Array | string): ZipFixtureEntry {
  const raw = typeof content === 'string' ? Buffer.from(content) : content;
  return { name, data: deflateRawSync(raw), deflated: true, uncompressedSize: raw.length, crc: crc32(raw) };
}

/** The two parts that make a ZIP look like a DOCX to the sniffer. */
export const DOCX_SKELETON = ['[Content_Types].xml', 'word/document.xml'];

/**
 * A one-page PDF whose content stream is `content`, deflated: the size it inflates to is the test's
 * choice. `toUnicode`: bfchar pairs of its font's ToUnicode map (code to UTF-16 hex), as in `<41> <0000>`.
 */
export function makeRawPdf(content: Uint8Array, toUnicode?: string[]): Uint8Array {
  const stream = deflateSync(content, { level: 9 });
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    null,
    `<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica${toUnicode ? ' /ToUnicode 6 0 R' : ''} >>`,
    ...(toUnicode ? [toUnicodeCMap(toUnicode)] : []),
  ];
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n')];
  const offsets: number[] = [];
  let length = parts[0]!.length;
  objects.forEach((body, i) => {
    offsets.push(length);
    const bytes = body === null
      ? Buffer.concat([Buffer.from(`${i + 1} 0 obj\n<< /Length ${stream.length} /Filter /FlateDecode >>\nstream\n`), stream, Buffer.from('\nendstream\nendobj\n')])
      : Buffer.from(`${i + 1} 0 obj\n${body}\nendobj\n`);
    parts.push(bytes);
    length += bytes.length;
  });
  const xref = ['xref', `0 ${objects.length + 1}`, '0000000000 65535 f ', ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n `)];
  parts.push(Buffer.from(`${xref.join('\n')}\ntrailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`));
  return new Uint8Array(Buffer.concat(parts));
}

function toUnicodeCMap(pairs: string[]): string {
  const cmap = ['/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Fixture def',
    '1 begincodespacerange <00> <FF> endcodespacerange', `${pairs.length} beginbfchar ${pairs.join(' ')} endbfchar`,
    'endcmap CMapName currentdict /CMap defineresource pop end end'].join('\n');
  return `<< /Length ${cmap.length} >>\nstream\n${cmap}\nendstream`;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A greyscale PNG; `pixels` is row-major, 0 black to 255 white. */
export function makePng(width: number, height: number, pixels: Uint8Array): Uint8Array {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 0; // greyscale
  const rows = Buffer.alloc((width + 1) * height);
  for (let y = 0; y < height; y++) rows.set(pixels.subarray(y * width, (y + 1) * width), y * (width + 1) + 1);
  return new Uint8Array(Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', deflateSync(rows)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]));
}

/** Only the PNG signature and an IHDR claiming `width` x `height`. */
export function pngHeader(width: number, height: number): Uint8Array {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8;
  return new Uint8Array(Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', header)]));
}

// A 5x7 bitmap font, just the letters the OCR test writes. Tesseract reads it reliably at 4-6 px a dot.
const GLYPHS: Record<string, string[]> = {
  H: ['10001', '10001', '10001', '11111', '10001', '10001', '10001'],
  E: ['11111', '10000', '10000', '11110', '10000', '10000', '11111'],
  L: ['10000', '10000', '10000', '10000', '10000', '10000', '11111'],
  O: ['01110', '10001', '10001', '10001', '10001', '10001', '01110'],
  T: ['11111', '00100', '00100', '00100', '00100', '00100', '00100'],
  R: ['11110', '10001', '10001', '11110', '10100', '10010', '10001'],
  U: ['10001', '10001', '10001', '10001', '10001', '10001', '01110'],
  ' ': ['00000', '00000', '00000', '00000', '00000', '00000', '00000'],
};

/** Black capitals on white, each font dot drawn as a `scale` x `scale` square. */
export function renderTextPng(text: string, scale = 5): Uint8Array {
  const margin = 6 * scale;
  const width = margin * 2 + text.length * 6 * scale;
  const height = margin * 2 + 7 * scale;
  const pixels = new Uint8Array(width * height).fill(255);
  [...text].forEach((char, index) => {
    const glyph = GLYPHS[char];
    if (glyph === undefined) throw new Error(`no glyph for ${char}`);
    glyph.forEach((row, gy) => {
      [...row].forEach((dot, gx) => {
        if (dot !== '1') return;
        const x0 = margin + (index * 6 + gx) * scale;
        const y0 = margin + gy * scale;
        for (let y = y0; y < y0 + scale; y++) pixels.fill(0, y * width + x0, y * width + x0 + scale);
      });
    });
  });
  return makePng(width, height, pixels);
}

/** SOI, an APP0 segment, then a baseline SOF0 declaring the size: enough for header parsing. */
export function jpegHeader(width: number, height: number): Uint8Array {
  const app0 = [0xff, 0xe0, 0x00, 0x10, ...Buffer.from('JFIF\0'), 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const sof0 = [0xff, 0xc0, 0x00, 0x0b, 8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0];
  return new Uint8Array([0xff, 0xd8, ...app0, ...sof0, 0xff, 0xd9]);
}

/** A RIFF/WEBP container whose first chunk is a VP8 (lossy), VP8L (lossless) or VP8X (extended) header. */
export function webpHeader(kind: 'VP8 ' | 'VP8L' | 'VP8X', width: number, height: number): Uint8Array {
  const data = Buffer.alloc(14);
  if (kind === 'VP8 ') {
    data.set([0x9d, 0x01, 0x2a], 3);
    data.writeUInt16LE(width & 0x3fff, 6);
    data.writeUInt16LE(height & 0x3fff, 8);
  } else if (kind === 'VP8L') {
    data[0] = 0x2f;
    data.writeUInt32LE(((width - 1) & 0x3fff) | (((height - 1) & 0x3fff) << 14), 1);
  } else {
    data.writeUIntLE(width - 1, 4, 3);
    data.writeUIntLE(height - 1, 7, 3);
  }
  const chunk = Buffer.concat([Buffer.from(kind, 'latin1'), Buffer.alloc(4), data]);
  chunk.writeUInt32LE(data.length, 4);
  const riff = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBP'), chunk]);
  riff.writeUInt32LE(riff.length - 8, 4);
  return new Uint8Array(riff);
}

/** A short Markdown document with two sections and one fact to retrieve (the lamp room's password). */
export const LORE = [
  '# The Lighthouse',
  '',
  'The lighthouse at Gullrock was built in 1821 by the Hollis family.',
  '',
  '## Secrets',
  '',
  'The keeper hides the spare key under the third step, and the password of the lamp room is AMBERGRIS-SEVEN.',
].join('\n');
