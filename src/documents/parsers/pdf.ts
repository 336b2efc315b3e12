// PDF text through pdf-parse (pdf.js), page by page. Runs only inside the parse worker.
// pdf.js is told not to evaluate generated code, fetch anything or render fonts: only text is read.
import { PDFParse } from 'pdf-parse';
import { hasOversizedStream } from '../pdf-streams.ts';
import { SectionBuilder } from '../section-builder.ts';
import type { ParseLimits, ParseResult } from '../types.ts';
import { toParseResult } from './parsed.ts';

const DAMAGED = 'The PDF is damaged or truncated and could not be read. Export it again and upload it.';

function failure(error: unknown): ParseResult {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') {
    return { ok: false, error: 'The PDF is protected by a password. Remove the password and upload it again.' };
  }
  return { ok: false, error: DAMAGED };
}

/** A complete PDF ends with %%EOF (writers may append a little after it); an upload cut short does not. */
function isTruncated(bytes: Uint8Array): boolean {
  return !Buffer.from(bytes.subarray(Math.max(0, bytes.length - 1024))).includes('%%EOF');
}

export async function parsePdf(bytes: Uint8Array, limits: ParseLimits): Promise<ParseResult> {
  if (isTruncated(bytes)) return { ok: false, error: DAMAGED };
  // The cap meant for DOCX unpacking bounds each PDF stream too: same threat, same budget.
  if (hasOversizedStream(bytes, limits.maxUncompressedBytes)) {
    return {
      ok: false,
      error: `The PDF holds a compressed part that unpacks to more than ${Math.ceil(limits.maxUncompressedBytes / 1_048_576)} MB, so it was not read. Print it to a new PDF or split it, then upload again.`,
    };
  }
  const parser = new PDFParse({
    data: bytes,
    isEvalSupported: false,
    enableXfa: false,
    useSystemFonts: false,
    disableFontFace: true,
    useWorkerFetch: false,
    stopAtErrors: false, // recover what text a slightly broken PDF still has
    maxImageSize: limits.maxPixels,
  });
  try {
    const { total } = await parser.getInfo();
    if (total > limits.maxPages) {
      return { ok: false, error: `The PDF has ${total} pages; at most ${limits.maxPages} are read. Split it into smaller files and upload them.` };
    }
    const text = await parser.getText({ first: limits.maxPages, pageJoiner: '' });
    const out = new SectionBuilder({ maxChars: limits.maxTextChars });
    for (const page of text.pages) {
      out.setPage(page.num);
      // pdf-parse separates lines with \n; blank lines are the closest thing to paragraphs.
      for (const paragraph of page.text.split(/\n\s*\n/)) {
        out.text(paragraph.replace(/[ \t]+\n/g, '\n'));
        out.paragraph();
      }
    }
    return toParseResult(
      { sections: out.finish(), pages: total },
      'The PDF has no text to read (it may be scanned pages). Upload the pages as PNG or JPEG images to have them read by OCR.',
    );
  } catch (error) {
    return failure(error);
  } finally {
    await parser.destroy();
  }
}
