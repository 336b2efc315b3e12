// DOCX through mammoth: Word's heading styles become h1-h6 in mammoth's HTML, which then goes
// through the same HTML reader as uploads. Runs only inside the parse worker, after the zip checks:
// mammoth inflates whole entries, so sizes are verified before it sees the bytes.
import mammoth from 'mammoth';
import { htmlToSections } from '../html-sections.ts';
import { checkZipBudget, DAMAGED_DOCX, readZipDirectory } from '../zip-inspect.ts';
import type { ParseLimits, ParseResult } from '../types.ts';
import { toParseResult } from './parsed.ts';

// Images are not text: give mammoth an empty src so it never reads or base64-encodes them.
const dropImages = mammoth.images.imgElement(() => Promise.resolve({ src: '' }));

export async function parseDocx(bytes: Uint8Array, limits: ParseLimits): Promise<ParseResult> {
  const directory = readZipDirectory(bytes);
  if (!directory.ok) {
    return {
      ok: false,
      error: directory.reason === 'zip64' ? 'The document is too large to read. Split it into smaller files.' : DAMAGED_DOCX,
    };
  }
  const refusal = checkZipBudget(bytes, directory.entries, limits);
  if (refusal !== null) return { ok: false, error: refusal };
  try {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const { value } = await mammoth.convertToHtml({ buffer }, { convertImage: dropImages, externalFileAccess: false });
    return toParseResult(
      { sections: htmlToSections(value, limits.maxTextChars) },
      'The document has no text to read. Check that it is the right file.',
    );
  } catch {
    return { ok: false, error: DAMAGED_DOCX };
  }
}
