// Image dimensions read from the header alone, so an image's pixel count is known before any
// decoder allocates width*height*4 bytes for it.
export interface ImageSize {
  width: number;
  height: number;
}

function png(dv: DataView): ImageSize | null {
  // Signature (8), then the IHDR chunk: length (4), "IHDR" (4), width, height.
  if (dv.byteLength < 24 || dv.getUint32(12) !== 0x49484452) return null;
  return { width: dv.getUint32(16), height: dv.getUint32(20) };
}

/** Start-of-frame markers carry the size; C4 (DHT), C8 (JPG) and CC (DAC) share the range but do not. */
function isStartOfFrame(marker: number): boolean {
  return marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
}

function jpeg(dv: DataView): ImageSize | null {
  let at = 2;
  while (at + 4 <= dv.byteLength) {
    if (dv.getUint8(at) !== 0xff) return null;
    const marker = dv.getUint8(at + 1);
    if (marker === 0xff) {
      at += 1; // fill byte
      continue;
    }
    // Markers without a length field.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
      at += 2;
      continue;
    }
    const length = dv.getUint16(at + 2);
    if (isStartOfFrame(marker)) {
      if (at + 9 > dv.byteLength) return null;
      return { height: dv.getUint16(at + 5), width: dv.getUint16(at + 7) };
    }
    if (marker === 0xda || marker === 0xd9 || length < 2) return null; // scan data or end before a frame header
    at += 2 + length;
  }
  return null;
}

function webp(dv: DataView): ImageSize | null {
  if (dv.byteLength < 30) return null;
  const chunk = String.fromCharCode(dv.getUint8(12), dv.getUint8(13), dv.getUint8(14), dv.getUint8(15));
  switch (chunk) {
    case 'VP8 ':
      // Frame tag (3) and start code 9d 01 2a, then 14-bit width and height.
      if (dv.getUint8(23) !== 0x9d || dv.getUint8(24) !== 0x01 || dv.getUint8(25) !== 0x2a) return null;
      return { width: dv.getUint16(26, true) & 0x3fff, height: dv.getUint16(28, true) & 0x3fff };
    case 'VP8L': {
      if (dv.getUint8(20) !== 0x2f) return null;
      const bits = dv.getUint32(21, true);
      return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
    }
    case 'VP8X': {
      const u24 = (at: number): number => dv.getUint8(at) | (dv.getUint8(at + 1) << 8) | (dv.getUint8(at + 2) << 16);
      return { width: u24(24) + 1, height: u24(27) + 1 };
    }
    default:
      return null;
  }
}

/** The image's size from its header, or null when the header is missing or malformed. */
export function readImageSize(bytes: Uint8Array, mimeType: 'image/png' | 'image/jpeg' | 'image/webp'): ImageSize | null {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  try {
    switch (mimeType) {
      case 'image/png': return png(dv);
      case 'image/jpeg': return jpeg(dv);
      case 'image/webp': return webp(dv);
    }
  } catch {
    return null; // a field ran past the end: truncated header
  }
}
