// A small reader of a ZIP's central directory, so a DOCX can be judged before anything inflates
// it: mammoth (through JSZip) inflates entries whole, so a bomb must be stopped here.
import { inflateRawSync } from 'node:zlib';

export interface ZipEntry {
  name: string;
  /** 0 stored, 8 deflate; DOCX writers use nothing else. */
  method: number;
  compressedSize: number;
  uncompressedSize: number;
  localHeaderOffset: number;
}

export type ZipDirectory =
  | { ok: true; entries: ZipEntry[] }
  | { ok: false; reason: 'not-zip' | 'damaged' | 'zip64' };

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
const EOCD_SIZE = 22;
const CENTRAL_SIZE = 46;
const LOCAL_SIZE = 30;
const MAX_COMMENT = 0xffff;

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Offset of the end-of-central-directory record, searched backwards over the comment space. */
function findEndRecord(bytes: Uint8Array, dv: DataView): number {
  const last = bytes.length - EOCD_SIZE;
  const first = Math.max(0, last - MAX_COMMENT);
  for (let at = last; at >= first; at--) {
    if (dv.getUint32(at, true) === EOCD_SIGNATURE && at + EOCD_SIZE + dv.getUint16(at + 20, true) <= bytes.length) return at;
  }
  return -1;
}

/** Reads the central directory. 'not-zip' means no end record at all, so the bytes are not a ZIP. */
export function readZipDirectory(bytes: Uint8Array): ZipDirectory {
  if (bytes.length < EOCD_SIZE) return { ok: false, reason: 'not-zip' };
  const dv = view(bytes);
  const end = findEndRecord(bytes, dv);
  if (end < 0) return { ok: false, reason: 'not-zip' };
  const count = dv.getUint16(end + 10, true);
  const size = dv.getUint32(end + 12, true);
  const offset = dv.getUint32(end + 16, true);
  // ZIP64 stores the real values elsewhere; Word never needs it for a document we would accept.
  if (count === 0xffff || size === 0xffffffff || offset === 0xffffffff) return { ok: false, reason: 'zip64' };
  if (offset + size > end) return { ok: false, reason: 'damaged' };
  const entries: ZipEntry[] = [];
  let at = offset;
  for (let i = 0; i < count; i++) {
    if (at + CENTRAL_SIZE > end || dv.getUint32(at, true) !== CENTRAL_SIGNATURE) return { ok: false, reason: 'damaged' };
    const nameLength = dv.getUint16(at + 28, true);
    const extraLength = dv.getUint16(at + 30, true);
    const commentLength = dv.getUint16(at + 32, true);
    const entry: ZipEntry = {
      method: dv.getUint16(at + 10, true),
      compressedSize: dv.getUint32(at + 20, true),
      uncompressedSize: dv.getUint32(at + 24, true),
      localHeaderOffset: dv.getUint32(at + 42, true),
      name: new TextDecoder().decode(bytes.subarray(at + CENTRAL_SIZE, at + CENTRAL_SIZE + nameLength)),
    };
    if (entry.compressedSize === 0xffffffff || entry.uncompressedSize === 0xffffffff || entry.localHeaderOffset === 0xffffffff) {
      return { ok: false, reason: 'zip64' };
    }
    entries.push(entry);
    at += CENTRAL_SIZE + nameLength + extraLength + commentLength;
  }
  if (at > end) return { ok: false, reason: 'damaged' };
  return { ok: true, entries };
}

/** The entry's compressed bytes, located through its local header; null when they lie outside the file. */
function entryData(bytes: Uint8Array, dv: DataView, entry: ZipEntry): Uint8Array | null {
  const at = entry.localHeaderOffset;
  if (at + LOCAL_SIZE > bytes.length || dv.getUint32(at, true) !== LOCAL_SIGNATURE) return null;
  const start = at + LOCAL_SIZE + dv.getUint16(at + 26, true) + dv.getUint16(at + 28, true);
  const stop = start + entry.compressedSize;
  return stop <= bytes.length ? bytes.subarray(start, stop) : null;
}

export interface ZipLimits {
  maxZipEntries: number;
  maxUncompressedBytes: number;
}

/**
 * Checks a DOCX against the caps and returns a user-facing reason to refuse it, or null.
 * The declared sizes are checked first (cheap); then each entry is inflated with an output cap of
 * its declared size, because a central directory can lie and JSZip would trust it.
 */
export function checkZipBudget(bytes: Uint8Array, entries: ZipEntry[], limits: ZipLimits): string | null {
  if (entries.length > limits.maxZipEntries) {
    return `The document holds ${entries.length} parts; at most ${limits.maxZipEntries} are read. Save it again from Word or split it.`;
  }
  const declared = entries.reduce((sum, e) => sum + e.uncompressedSize, 0);
  if (declared > limits.maxUncompressedBytes) {
    return `The document unpacks to ${megabytes(declared)}; at most ${megabytes(limits.maxUncompressedBytes)} are read. Remove large images or split it.`;
  }
  const dv = view(bytes);
  for (const entry of entries) {
    const data = entryData(bytes, dv, entry);
    if (data === null) return DAMAGED_DOCX;
    if (entry.method === 0) {
      if (entry.compressedSize !== entry.uncompressedSize) return DAMAGED_DOCX;
      continue;
    }
    if (entry.method !== 8) return 'The document uses a compression method Word does not write. Save it again as .docx from Word or LibreOffice.';
    try {
      const inflated = inflateRawSync(data, { maxOutputLength: Math.max(1, entry.uncompressedSize) });
      if (inflated.length !== entry.uncompressedSize) return DAMAGED_DOCX;
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        return 'The document unpacks to more than its own index declares, which is how a zip bomb works; it was not read.';
      }
      return DAMAGED_DOCX;
    }
  }
  return null;
}

export const DAMAGED_DOCX = 'The DOCX file is damaged or truncated and could not be read. Save it again from Word and upload it.';

function megabytes(bytes: number): string {
  return `${Math.round(bytes / 1_048_576)} MB`;
}
