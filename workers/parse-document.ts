// Piscina task: bytes of an upload (type already sniffed) -> text sections, or a reason a user can
// act on. Runs in a worker thread with memory and time caps set by workers/parser-pool.ts.
import { htmlToSections } from '../src/documents/html-sections.ts';
import { markdownToSections } from '../src/documents/markdown-sections.ts';
import { toParseResult } from '../src/documents/parsers/parsed.ts';
import { SectionBuilder } from '../src/documents/section-builder.ts';
import type { DocumentMimeType, ParseLimits, ParseResult } from '../src/documents/types.ts';
import { chunkSections, type ChunkOptions } from '../src/documents/chunker.ts';
import { packChunks } from '../src/documents/packed-chunks.ts';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { runBelowNormalPriority } from '../src/thread-priority.ts';

runBelowNormalPriority();

export interface ParseTask {
  bytes: Uint8Array;
  mimeType: DocumentMimeType;
  limits: ParseLimits;
}

export interface ExtractTask extends ParseTask {
  chunking: ChunkOptions;
}

/** `packed`: the chunks as packChunks lays them out (src/documents/packed-chunks.ts). */
export type ExtractResult = { ok: true; packed: Uint8Array; pages: number | null } | { ok: false; error: string };

const NO_TEXT = 'The file has no text to read. Check that it is the right file.';

function decode(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return null;
  }
}

function plainText(text: string, maxChars: number): ParseResult {
  const out = new SectionBuilder({ maxChars });
  for (const paragraph of text.replace(/\r\n?/g, '\n').split(/\n\s*\n/)) {
    out.text(paragraph);
    out.paragraph();
  }
  return toParseResult({ sections: out.finish() }, NO_TEXT);
}

function textFormat(task: ParseTask): ParseResult {
  const text = decode(task.bytes);
  if (text === null) return { ok: false, error: 'The file is not valid UTF-8 text. Save it as UTF-8 and upload it again.' };
  // The upload's type is judged by the file's start; a NUL further in could not be stored as text.
  const nul = text.indexOf('\u0000');
  if (nul >= 0) return { ok: false, error: `The file holds a NUL character (at character ${nul}), which text cannot contain. Remove it and upload the file again.` };
  const max = task.limits.maxTextChars;
  if (task.mimeType === 'text/html') return toParseResult({ sections: htmlToSections(text, max) }, NO_TEXT);
  if (task.mimeType === 'text/markdown') return toParseResult({ sections: markdownToSections(text, max) }, NO_TEXT);
  return plainText(text, max);
}

// pdf.js, mammoth and tesseract.js load on first use: a fresh worker starts in milliseconds,
// which matters because every timed-out or out-of-memory task costs a new one.
export default async function parseDocument(task: ParseTask): Promise<ParseResult> {
  switch (task.mimeType) {
    case 'application/pdf':
      return (await import('../src/documents/parsers/pdf.ts')).parsePdf(task.bytes, task.limits);
    case 'application/vnd.openxmlformats-officedocument.wordprocessingml.document':
      return (await import('../src/documents/parsers/docx.ts')).parseDocx(task.bytes, task.limits);
    case 'image/png':
    case 'image/jpeg':
    case 'image/webp':
      return (await import('../src/documents/parsers/image.ts')).parseImage(task.bytes, task.mimeType, task.limits);
    case 'text/plain':
    case 'text/markdown':
    case 'text/html':
      return textFormat(task);
  }
}

/**
 * Parse and chunk in one task, so chunking a large document (a tenth of a second or more for
 * tens of megabytes) also stays off the main thread, and only the chunks travel back: packed in
 * one buffer that is transferred, not cloned, so the main thread never deserialises them at once.
 */
export async function extractChunks(task: ExtractTask): Promise<ExtractResult | ReturnType<typeof move>> {
  const parsed = await parseDocument(task);
  if (!parsed.ok) return parsed;
  const packed = packChunks(chunkSections(parsed.sections, task.chunking));
  const result: ExtractResult = { ok: true, packed, pages: parsed.pages };
  return move({ [transferableSymbol]: [packed.buffer], [valueSymbol]: result });
}

