/**
 * msgpack decoders (msgpackr, which Colyseus uses for room messages) replace invalid UTF-8 in
 * strings with U+FFFD, silently. This scan finds such strings in the encoded bytes first, so a
 * game client's message gets the same answer as an HTTP body with invalid UTF-8.
 *
 * Values follow each other in the encoding, containers' children included, so one linear pass
 * over the headers visits every string. Bytes that are not msgpack stop the scan (false): the
 * decoder then reports them its own way.
 */

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Header size of fixed-size formats 0xc0-0xdf, and their payload; -1 marks variable ones. */
const FIXED: Readonly<Record<number, number>> = {
  0xc0: 1, 0xc2: 1, 0xc3: 1, // nil, false, true
  0xca: 5, 0xcb: 9, // float32, float64
  0xcc: 2, 0xcd: 3, 0xce: 5, 0xcf: 9, // uint8-64
  0xd0: 2, 0xd1: 3, 0xd2: 5, 0xd3: 9, // int8-64
  0xd4: 3, 0xd5: 4, 0xd6: 6, 0xd7: 10, 0xd8: 18, // fixext 1-16 (type byte + data)
  0xdc: 3, 0xdd: 5, 0xde: 3, 0xdf: 5, // array16/32, map16/32: children follow
};

export function hasInvalidUtf8String(bytes: Uint8Array): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  let i = 0;
  const length = (at: number, size: 1 | 2 | 4): number => {
    if (at + size > end) return -1;
    return size === 1 ? view.getUint8(at) : size === 2 ? view.getUint16(at) : view.getUint32(at);
  };
  while (i < end) {
    const b = bytes[i] as number;
    // positive/negative fixint, fixmap, fixarray: one byte, children (if any) follow
    if (b <= 0x9f || b >= 0xe0) {
      i += 1;
      continue;
    }
    let header: number;
    let size: number;
    let isString = false;
    if (b <= 0xbf) {
      header = 1;
      size = b & 0x1f;
      isString = true;
    } else if (b === 0xd9 || b === 0xda || b === 0xdb) {
      const width = b === 0xd9 ? 1 : b === 0xda ? 2 : 4;
      header = 1 + width;
      size = length(i + 1, width);
      isString = true;
    } else if (b === 0xc4 || b === 0xc5 || b === 0xc6) {
      const width = b === 0xc4 ? 1 : b === 0xc5 ? 2 : 4;
      header = 1 + width;
      size = length(i + 1, width);
    } else if (b === 0xc7 || b === 0xc8 || b === 0xc9) {
      const width = b === 0xc7 ? 1 : b === 0xc8 ? 2 : 4;
      header = 2 + width; // length, then the ext type byte
      size = length(i + 1, width);
    } else {
      const fixed = FIXED[b];
      if (fixed === undefined) return false; // 0xc1 is never used: not msgpack
      header = fixed;
      size = 0;
    }
    if (size < 0 || i + header + size > end) return false;
    if (isString && size > 0) {
      try {
        strictUtf8.decode(bytes.subarray(i + header, i + header + size));
      } catch {
        return true;
      }
    }
    i += header + size;
  }
  return false;
}
