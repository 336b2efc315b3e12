// Decompression-bomb check for PDFs, run before pdf.js sees the file. pdf.js inflates a stream
// whole into an ArrayBuffer, and ArrayBuffers live outside the V8 heap that the worker's memory
// cap bounds, so a FlateDecode stream that inflates to gigabytes would not be stopped by it.
// Every stream's filter chain is decoded here with its output capped instead.
// Limitation: streams of encrypted PDFs cannot be decoded without the key and are not checked.
import { constants, inflateSync } from 'node:zlib';

class TooLarge extends Error {}

function flate(data: Uint8Array, cap: number): Uint8Array {
  try {
    // Sync flush: a truncated stream yields what it decodes, as pdf.js would read it.
    return inflateSync(data, { maxOutputLength: cap, finishFlush: constants.Z_SYNC_FLUSH });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw new TooLarge();
    return new Uint8Array(0); // pdf.js cannot decode it either
  }
}

function append(prefix: Uint8Array, byte: number): Uint8Array {
  const out = new Uint8Array(prefix.length + 1);
  out.set(prefix);
  out[prefix.length] = byte;
  return out;
}

/** LZW as PDF uses it (9-12 bit codes, 256 clear, 257 end, early change). */
function lzw(data: Uint8Array, cap: number): Uint8Array {
  let output = new Uint8Array(Math.min(cap, data.length * 8 + 1024));
  let length = 0;
  const push = (bytes: Uint8Array): void => {
    if (length + bytes.length > cap) throw new TooLarge();
    if (length + bytes.length > output.length) {
      const grown = new Uint8Array(Math.min(cap, Math.max(output.length * 2, length + bytes.length)));
      grown.set(output.subarray(0, length));
      output = grown;
    }
    output.set(bytes, length);
    length += bytes.length;
  };
  let table: Uint8Array[] = [];
  const reset = (): void => {
    table = Array.from({ length: 258 }, (_, i) => Uint8Array.of(i));
  };
  reset();
  let width = 9;
  let previous: Uint8Array | null = null;
  let bits = 0;
  let buffer = 0;
  for (const byte of data) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= width) {
      const code = (buffer >>> (bits - width)) & ((1 << width) - 1);
      bits -= width;
      buffer &= (1 << bits) - 1;
      if (code === 257) return output.subarray(0, length);
      if (code === 256) {
        reset();
        width = 9;
        previous = null;
        continue;
      }
      const prior: Uint8Array | null = previous;
      // A code not yet in the table is the previous string plus its own first byte.
      const entry: Uint8Array | undefined = table[code] ?? (prior === null ? undefined : append(prior, prior[0]!));
      if (entry === undefined) return output.subarray(0, length);
      push(entry);
      if (prior !== null && table.length < 4096) table.push(append(prior, entry[0]!));
      previous = entry;
      if (table.length + 1 >= 1 << width && width < 12) width++;
    }
  }
  return output.subarray(0, length);
}

function runLength(data: Uint8Array, cap: number): Uint8Array {
  const parts: Uint8Array[] = [];
  let length = 0;
  for (let at = 0; at < data.length; ) {
    const n = data[at]!;
    if (n === 128) break;
    const part = n < 128 ? data.subarray(at + 1, at + 2 + n) : new Uint8Array(257 - n).fill(data[at + 1] ?? 0);
    at += n < 128 ? n + 2 : 2;
    length += part.length;
    if (length > cap) throw new TooLarge();
    parts.push(part);
  }
  return Buffer.concat(parts);
}

function asciiHex(data: Uint8Array): Uint8Array {
  const text = Buffer.from(data).toString('latin1').split('>')[0]!.replace(/[^0-9a-f]/gi, '');
  return Buffer.from(text.length % 2 ? `${text}0` : text, 'hex');
}

function ascii85(data: Uint8Array): Uint8Array {
  const text = Buffer.from(data).toString('latin1').split('~>')[0]!.replace(/\s/g, '');
  const out: number[] = [];
  let group: number[] = [];
  const emit = (digits: number[], keep: number): void => {
    const value = digits.reduce((acc, d) => acc * 85 + d, 0);
    for (let i = 0; i < keep; i++) out.push((value >>> (24 - 8 * i)) & 0xff);
  };
  for (const char of text) {
    if (char === 'z' && group.length === 0) {
      out.push(0, 0, 0, 0);
      continue;
    }
    group.push(char.charCodeAt(0) - 33);
    if (group.length === 5) {
      emit(group, 4);
      group = [];
    }
  }
  if (group.length > 1) emit([...group, ...Array<number>(5 - group.length).fill(84)], group.length - 1);
  return Uint8Array.from(out);
}

const DECODERS: Record<string, (data: Uint8Array, cap: number) => Uint8Array> = {
  FlateDecode: flate, Fl: flate,
  LZWDecode: lzw, LZW: lzw,
  RunLengthDecode: runLength, RL: runLength,
  ASCIIHexDecode: asciiHex, AHx: asciiHex,
  ASCII85Decode: ascii85, A85: ascii85,
};

/** Filter names of a stream dictionary, in decoding order. */
function filters(dictionary: string): string[] {
  const match = /\/Filter\s*(\[[^\]]*\]|\/[A-Za-z0-9]+)/.exec(dictionary);
  return match ? [...match[1]!.matchAll(/\/([A-Za-z0-9]+)/g)].map((m) => m[1]!) : [];
}

/** The dictionary text before a `stream` keyword at `at`, found by balancing << and >> backwards. */
function dictionaryBefore(text: string, at: number): string | null {
  let end = at;
  while (end > 0 && /\s/.test(text[end - 1]!)) end--;
  if (text.slice(end - 2, end) !== '>>') return null;
  let depth = 0;
  for (let i = end - 2; i >= 1 && end - i < 65_536; i--) {
    if (text[i] === '>' && text[i + 1] === '>') depth++;
    else if (text[i - 1] === '<' && text[i] === '<') {
      depth--;
      if (depth === 0) return text.slice(i - 1, end);
      i--;
    }
  }
  return null;
}

/** Decodes each stream's filter chain, every stage capped: true when one would exceed `maxStreamBytes`. */
export function hasOversizedStream(bytes: Uint8Array, maxStreamBytes: number): boolean {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  const keyword = /stream\r?\n/g;
  for (let match = keyword.exec(text); match !== null; match = keyword.exec(text)) {
    if (text.slice(match.index - 3, match.index) === 'end') continue;
    const dictionary = dictionaryBefore(text, match.index);
    if (dictionary === null) continue;
    const start = match.index + match[0].length;
    const stop = text.indexOf('endstream', start);
    let data = bytes.subarray(start, stop < 0 ? bytes.length : stop);
    try {
      for (const name of filters(dictionary)) {
        const decode = DECODERS[name];
        if (decode === undefined) break; // image codecs and Crypt: not decoded for text
        data = decode(data, maxStreamBytes);
      }
    } catch (error) {
      if (error instanceof TooLarge) return true;
      throw error;
    }
    keyword.lastIndex = stop < 0 ? bytes.length : stop;
  }
  return false;
}
