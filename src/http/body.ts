import { TroupeError } from '../errors.ts';
import type { HttpRequest } from './types.ts';

/**
 * Reads a whole request body, failing with 413 as soon as more than `limit` bytes arrive (or
 * Content-Length announces more); the rest is never read.
 */
export async function readBody(request: HttpRequest, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk);
  }
  return chunks.length === 1 ? (chunks[0] as Uint8Array) : Buffer.concat(chunks);
}

function tooLarge(limit: number): TroupeError {
  return new TroupeError('payload_too_large', `The request body is larger than the ${limit}-byte limit.`);
}
