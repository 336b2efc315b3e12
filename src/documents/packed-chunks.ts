// A document's chunks as one byte buffer, so the parser thread can hand them over without a
// copy and the main thread decodes a chunk's text only when its block is embedded or written.
// Structured-cloning 17,548 chunk objects (a 50 MB text file) back from the parser was one
// 30-50 ms stall of the main thread; decoding a batch of them costs a millisecond or two.
import type { Chunk } from './chunker.ts';

/** What the writers and the embedder read: a plain array of chunks is adapted by chunkList(). */
export interface ChunkList {
  readonly length: number;
  ordinal(index: number): number;
  /** The whole chunk, its text decoded now. */
  at(index: number): Chunk;
  /** The texts of [from, to), decoded now. */
  contents(from: number, to: number): string[];
}

export function chunkList(chunks: readonly Chunk[]): ChunkList {
  const at = (index: number): Chunk => {
    const chunk = chunks[index];
    if (!chunk) throw new RangeError(`no chunk at ${index} of ${chunks.length}`);
    return chunk;
  };
  return {
    length: chunks.length,
    ordinal: (index) => at(index).ordinal,
    at,
    contents: (from, to) => chunks.slice(from, to).map((c) => c.content),
  };
}

/** Per chunk: ordinal, token count, page (-1: none), heading path index, start and end offset, text start and end byte. */
const FIELDS = 8;
const HEADER_BYTES = 8;

/**
 * Layout: u32 chunk count, u32 byte length of the heading paths' JSON, that JSON (every distinct
 * heading path once), padding to 4 bytes, FIELDS int32 per chunk, then every text as UTF-8.
 */
export function packChunks(chunks: readonly Chunk[]): Uint8Array {
  const headingIndex = new Map<string, number>();
  const headings: string[][] = [];
  const headingOf = chunks.map((c) => {
    const key = JSON.stringify(c.headingPath);
    let index = headingIndex.get(key);
    if (index === undefined) {
      index = headings.push(c.headingPath) - 1;
      headingIndex.set(key, index);
    }
    return index;
  });
  const headingJson = Buffer.from(JSON.stringify(headings));
  const fieldsAt = align4(HEADER_BYTES + headingJson.length);
  const textAt = fieldsAt + chunks.length * FIELDS * 4;
  let textBytes = 0;
  for (const c of chunks) textBytes += Buffer.byteLength(c.content);
  const out = Buffer.alloc(textAt + textBytes);
  out.writeUInt32LE(chunks.length, 0);
  out.writeUInt32LE(headingJson.length, 4);
  headingJson.copy(out, HEADER_BYTES);
  const fields = new Int32Array(out.buffer, out.byteOffset + fieldsAt, chunks.length * FIELDS);
  let at = 0;
  chunks.forEach((c, i) => {
    const written = out.write(c.content, textAt + at, 'utf8');
    fields.set([c.ordinal, c.tokenCount, c.page ?? -1, headingOf[i] ?? 0, c.startOffset, c.endOffset, at, at + written], i * FIELDS);
    at += written;
  });
  return out;
}

/** The receiving side of packChunks. */
export class PackedChunks implements ChunkList {
  readonly length: number;
  readonly #fields: Int32Array;
  readonly #text: Buffer;
  readonly #headings: string[][];

  constructor(bytes: Uint8Array) {
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (buf.length < HEADER_BYTES) throw new Error('packed chunks: truncated header');
    this.length = buf.readUInt32LE(0);
    const headingBytes = buf.readUInt32LE(4);
    const fieldsAt = align4(HEADER_BYTES + headingBytes);
    const textAt = fieldsAt + this.length * FIELDS * 4;
    if (textAt > buf.length) throw new Error('packed chunks: truncated fields');
    this.#headings = JSON.parse(buf.toString('utf8', HEADER_BYTES, HEADER_BYTES + headingBytes)) as string[][];
    // A copy of the fields when they are not aligned in memory (Int32Array needs 4-byte offsets).
    this.#fields =
      (buf.byteOffset + fieldsAt) % 4 === 0
        ? new Int32Array(buf.buffer, buf.byteOffset + fieldsAt, this.length * FIELDS)
        : new Int32Array(Uint8Array.prototype.slice.call(buf, fieldsAt, textAt).buffer);
    this.#text = buf.subarray(textAt);
  }

  static from(chunks: readonly Chunk[]): PackedChunks {
    return new PackedChunks(packChunks(chunks));
  }

  ordinal(index: number): number {
    return this.#field(index, 0);
  }

  at(index: number): Chunk {
    const page = this.#field(index, 2);
    return {
      ordinal: this.#field(index, 0),
      content: this.#content(index),
      tokenCount: this.#field(index, 1),
      page: page < 0 ? null : page,
      headingPath: this.#headings[this.#field(index, 3)] ?? [],
      startOffset: this.#field(index, 4),
      endOffset: this.#field(index, 5),
    };
  }

  contents(from: number, to: number): string[] {
    const out: string[] = [];
    for (let i = from; i < Math.min(to, this.length); i++) out.push(this.#content(i));
    return out;
  }

  #content(index: number): string {
    return this.#text.toString('utf8', this.#field(index, 6), this.#field(index, 7));
  }

  #field(index: number, field: number): number {
    if (index < 0 || index >= this.length) throw new RangeError(`no chunk at ${index} of ${this.length}`);
    return this.#fields[index * FIELDS + field] ?? 0;
  }
}

const align4 = (n: number): number => (n + 3) & ~3;
