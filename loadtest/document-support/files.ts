/**
 * Binary document fixtures for the documents benchmark, built with the same libraries as the
 * tests' fixtures (pdfkit, docx): ~50 MB PDF and DOCX files whose
 * bulk is one incompressible greyscale image per page or section, the way real large office files
 * are large (their text alone rarely reaches 50 MB).
 */
import { randomFillSync } from 'node:crypto';
import { Document, ImageRun, Packer, Paragraph, HeadingLevel } from 'docx';
import PDFDocument from 'pdfkit';
import { makePng } from '../../test/support/document-fixtures.ts';
import { paragraphs, vocabulary, WordSampler } from './text.ts';

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
