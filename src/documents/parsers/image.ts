// Images through tesseract.js OCR, offline: the English data ships in @tesseract.js-data/eng and
// nothing is fetched or cached on disk. The pixel count comes from the header before decoding,
// since the decoder allocates width*height*4 bytes up front. Runs only inside the parse worker.
import { createRequire } from 'node:module';
import { createWorker, type Worker } from 'tesseract.js';
import { readImageSize } from '../image-header.ts';
import { SectionBuilder } from '../section-builder.ts';
import type { ParseLimits, ParseResult } from '../types.ts';
import { toParseResult } from './parsed.ts';

type ImageType = 'image/png' | 'image/jpeg' | 'image/webp';

const NAMES: Record<ImageType, string> = { 'image/png': 'PNG', 'image/jpeg': 'JPEG', 'image/webp': 'WebP' };

const english = createRequire(import.meta.url)('@tesseract.js-data/eng') as { langPath: string; gzip: boolean };

// One OCR engine per parse thread, created on first use: loading the model costs about a second.
// It lives in a nested thread that ends with this one, so a killed parse worker takes it along.
let engine: Promise<Worker> | undefined;

function ocr(): Promise<Worker> {
  engine ??= createWorker('eng', undefined, { langPath: english.langPath, gzip: english.gzip, cacheMethod: 'none' });
  return engine;
}

export async function parseImage(bytes: Uint8Array, mimeType: ImageType, limits: ParseLimits): Promise<ParseResult> {
  const name = NAMES[mimeType];
  const size = readImageSize(bytes, mimeType);
  if (size === null || size.width === 0 || size.height === 0) {
    return { ok: false, error: `The ${name} image is damaged or truncated and could not be read. Export it again and upload it.` };
  }
  const pixels = size.width * size.height;
  if (pixels > limits.maxPixels) {
    return {
      ok: false,
      error: `The image is ${size.width}x${size.height} pixels; at most ${limits.maxPixels} pixels are read. Scale it down and upload again.`,
    };
  }
  try {
    const worker = await ocr();
    const { data } = await worker.recognize(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    const out = new SectionBuilder({ maxChars: limits.maxTextChars });
    for (const paragraph of data.text.split(/\n\s*\n/)) {
      out.text(paragraph);
      out.paragraph();
    }
    return toParseResult({ sections: out.finish() }, `No text was found in the ${name} image. Upload a sharper scan or the original document.`);
  } catch {
    // A failed recognition can leave the engine unusable; the next image gets a fresh one.
    const failed = engine;
    engine = undefined;
    await failed?.then((w) => w.terminate()).catch(() => undefined);
    return { ok: false, error: `The ${name} image is damaged or truncated and could not be read. Export it again and upload it.` };
  }
}
