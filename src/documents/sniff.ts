// Decides an upload's type from its bytes. The declared type and the file name only choose
// between plain text, Markdown and HTML; for binary formats they must agree with the bytes.
//
// Rules, in order:
// - empty -> refused;
// - a PDF (`%PDF-` at offset 0) that also carries a readable ZIP directory is a polyglot: refused,
//   because two parsers would see two different documents;
// - PDF, PNG, JPEG, WebP by magic number; DOCX = a ZIP listing word/document.xml and [Content_Types].xml;
// - otherwise valid UTF-8 without NUL or control bytes is text; html/markdown/plain by declaration,
//   name, then markup;
// - a declared binary type (pdf, docx, any image/*) that differs from what the bytes are is refused.
import { readZipDirectory } from './zip-inspect.ts';
import type { DocumentMimeType } from './types.ts';

export type SniffResult = { ok: true; mimeType: DocumentMimeType } | { ok: false; status: 415; message: string };

const PDF = 'application/pdf';
const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

const ACCEPTED = 'Accepted types: PDF, DOCX, plain text, Markdown, HTML, PNG, JPEG and WebP.';

/** Common aliases clients send, mapped to the type they mean. */
const ALIASES: Record<string, string> = {
  'image/jpg': 'image/jpeg',
  'image/pjpeg': 'image/jpeg',
  'application/x-pdf': PDF,
  'text/x-markdown': 'text/markdown',
  'application/xhtml+xml': 'text/html',
};

function startsWith(bytes: Uint8Array, prefix: readonly number[], at = 0): boolean {
  return prefix.every((b, i) => bytes[at + i] === b);
}

const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));
const PDF_MAGIC = ascii('%PDF-');
const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const ZIP_LOCAL = ascii('PK\x03\x04');

function binaryType(bytes: Uint8Array): DocumentMimeType | 'zip' | 'damaged-zip' | 'polyglot' | null {
  const zip = readZipDirectory(bytes);
  if (startsWith(bytes, PDF_MAGIC)) return zip.ok ? 'polyglot' : PDF;
  if (startsWith(bytes, PNG_MAGIC)) return 'image/png';
  // SOI followed by the start of another marker.
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (startsWith(bytes, ascii('RIFF')) && startsWith(bytes, ascii('WEBP'), 8)) return 'image/webp';
  if (zip.ok) {
    const names = new Set(zip.entries.map((e) => e.name));
    return names.has('word/document.xml') && names.has('[Content_Types].xml') ? DOCX : 'zip';
  }
  if (startsWith(bytes, ZIP_LOCAL)) return 'damaged-zip';
  return null;
}

/**
 * How much of a text file the sniffer reads. Scanning all of a 50 MB upload here would block
 * the event loop for a noticeable time; the parse worker decodes the whole file strictly and
 * fails the document with a clear message if the rest is not UTF-8.
 */
const TEXT_SNIFF_BYTES = 64 * 1024;

/** Valid UTF-8 (a BOM allowed) with no NUL or C0 control bytes other than tab, newlines and form feed, judged by the file's start. */
function decodeText(bytes: Uint8Array): string | null {
  const head = bytes.subarray(0, TEXT_SNIFF_BYTES);
  for (let i = 0; i < head.length; i++) {
    const b = head[i] as number;
    if (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d && b !== 0x0c) return null;
    if (b === 0x7f) return null;
  }
  try {
    // `stream: true` keeps a character cut at the boundary instead of calling it invalid.
    return new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: head.length < bytes.length });
  } catch {
    return null;
  }
}

const HTML_START = /^\s*(?:<\?xml[^>]*>\s*)?(?:<!--[\s\S]*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>]/i;

function textType(text: string, declared: string, filename: string): DocumentMimeType {
  const name = filename.toLowerCase();
  if (declared === 'text/html') return 'text/html';
  if (declared === 'text/markdown') return 'text/markdown';
  if (HTML_START.test(text.slice(0, 4096)) || name.endsWith('.html') || name.endsWith('.htm')) return 'text/html';
  if (name.endsWith('.md') || name.endsWith('.markdown')) return 'text/markdown';
  return 'text/plain';
}

function normalise(declared: string | undefined): string {
  const base = (declared ?? '').split(';')[0]!.trim().toLowerCase();
  return ALIASES[base] ?? base;
}

/** A declaration that names a binary format: only then must the bytes match it. */
function declaresBinary(declared: string): boolean {
  return declared === PDF || declared === DOCX || declared.startsWith('image/');
}

function label(type: string): string {
  switch (type) {
    case PDF: return 'a PDF';
    case DOCX: return 'a Word document (DOCX)';
    case 'image/png': return 'a PNG image';
    case 'image/jpeg': return 'a JPEG image';
    case 'image/webp': return 'a WebP image';
    case 'text': return 'text';
    default: return type;
  }
}

function refuse(message: string): SniffResult {
  return { ok: false, status: 415, message };
}

export function detectDocumentType(bytes: Uint8Array, declared: string | undefined, filename: string): SniffResult {
  if (bytes.length === 0) return refuse('The file is empty. Choose the file again and upload it.');
  const claimed = normalise(declared);
  const binary = binaryType(bytes);
  if (binary === 'polyglot') {
    return refuse('The file is both a PDF and a ZIP archive, so its content is ambiguous. Export it again as a plain PDF and upload that.');
  }
  if (binary === 'damaged-zip') {
    return refuse('The file looks like a ZIP or DOCX but is damaged or truncated. Save it again from Word and upload it.');
  }
  if (binary === 'zip') {
    return refuse(`The file is a ZIP archive but not a Word document. Unpack it and upload the documents inside. ${ACCEPTED}`);
  }
  let actual: DocumentMimeType;
  if (binary !== null) {
    actual = binary;
  } else {
    const text = decodeText(bytes);
    if (text === null) {
      return refuse(`The file's type could not be recognised (it is neither a supported binary format nor UTF-8 text). ${ACCEPTED}`);
    }
    if (declaresBinary(claimed)) {
      return refuse(`The file was sent as ${label(claimed)} but contains ${label('text')}. Upload the real file, or send it with a text type.`);
    }
    actual = textType(text, claimed, filename);
  }
  if (declaresBinary(claimed) && claimed !== actual) {
    return refuse(`The file was sent as ${label(claimed)} but contains ${label(actual)}. Upload it with the right type or name.`);
  }
  // Other declarations (octet-stream, application/zip, application/json...) say too little to refuse.
  if (claimed.startsWith('text/') && binary !== null) {
    return refuse(`The file was sent as ${claimed} but contains ${label(actual)}. Upload it with the right type or name.`);
  }
  return { ok: true, mimeType: actual };
}
