import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { readFilePart } from '../../src/http/multipart.ts';

const BOUNDARY = 'troupe-test-boundary';

function body(file: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n`),
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="lore.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

/** The body in pieces of `size` bytes, as an engine hands it over. */
async function* pieces(bytes: Buffer, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

describe('readFilePart', () => {
  const file = randomBytes(300_000);
  const whole = body(file);
  const read = (contentLength: string | undefined) =>
    readFilePart({ 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, ...(contentLength === undefined ? {} : { 'content-length': contentLength }) }, pieces(whole, 7_000), {
      field: 'file',
      maxBytes: 1024 * 1024,
    });

  it('returns the file byte for byte with a Content-Length, without one, and with one that understates the body', async () => {
    for (const length of [String(whole.length), undefined, String(1_000)]) {
      const part = await read(length);
      expect(part.name).toBe('lore.bin');
      expect(part.declaredType).toBe('application/octet-stream');
      expect(Buffer.from(part.bytes).equals(file)).toBe(true);
    }
  });

  it('refuses a file past the limit with 413', async () => {
    const big = body(randomBytes(64 * 1024));
    const reading = readFilePart({ 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': String(big.length) }, pieces(big, 4_096), { field: 'file', maxBytes: 10_000 });
    await expect(reading).rejects.toMatchObject({ code: 'payload_too_large' });
  });
});
