import { createHash, randomBytes } from 'node:crypto';

const API_KEY_PREFIX = 'sk-troupe-';
const KEY_SHAPE = /^sk-troupe-[A-Za-z0-9_-]{16,200}$/;

/** A new key: the vendor prefix and 32 random bytes in base64url (256 bits of secret). */
export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function looksLikeApiKey(value: string): boolean {
  return KEY_SHAPE.test(value);
}

/** Keys carry 256 random bits, so a fast hash is enough; no salt or slow KDF is needed. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** What listings show so people can tell keys apart without seeing the secret. */
export function displayPrefix(key: string): string {
  return key.slice(0, API_KEY_PREFIX.length + 4);
}
