import { randomBytes } from 'node:crypto';

/** Prefixes from the service interface, plus the project and API key ids of the admin API. */
export const ID_PREFIX = {
  project: 'proj_',
  apiKey: 'key_',
  character: 'character_',
  capability: 'capability_',
  conversation: 'conv_',
  message: 'msg_',
  document: 'doc_',
  chunk: 'chunk_',
  room: 'room_',
  participant: 'participant_',
  /** Room transcript entries; the interface gives them no prefix. */
  transcriptEntry: 'entry_',
  reply: 'reply_',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

let lastMs = 0;
let lastRandom: Uint8Array = new Uint8Array(10);

/**
 * Time-ordered ids (48-bit ms timestamp + 80 random bits, base32), so sorting by id is creation
 * order and list cursors can be ids. Within one millisecond the random part is incremented to
 * keep ids from one process strictly increasing.
 */
export function newId(kind: IdKind, now: number = Date.now()): string {
  let random: Uint8Array;
  if (now <= lastMs) {
    now = lastMs;
    random = increment(lastRandom);
  } else {
    random = randomBytes(10);
  }
  lastMs = now;
  lastRandom = random;
  return ID_PREFIX[kind] + encodeTime(now) + encodeRandom(random);
}

function encodeTime(ms: number): string {
  let out = '';
  let value = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET.charAt(value % 32) + out;
    value = Math.floor(value / 32);
  }
  return out;
}

function encodeRandom(bytes: Uint8Array): string {
  let bits = 0n;
  for (const b of bytes) bits = (bits << 8n) | BigInt(b);
  let out = '';
  for (let i = 0; i < 16; i++) {
    out = ALPHABET.charAt(Number(bits & 31n)) + out;
    bits >>= 5n;
  }
  return out;
}

function increment(bytes: Uint8Array): Uint8Array {
  const next = Uint8Array.from(bytes);
  for (let i = next.length - 1; i >= 0; i--) {
    const v = (next[i] ?? 0) + 1;
    next[i] = v & 0xff;
    if (v <= 0xff) break;
  }
  return next;
}

/** True when `id` has the prefix of `kind` and the shape `newId` produces. */
export function isId(kind: IdKind, id: string): boolean {
  const prefix = ID_PREFIX[kind];
  return id.startsWith(prefix) && /^[0-9a-z]{26}$/.test(id.slice(prefix.length));
}

/**
 * Request ids: a random per-process prefix and a counter, unique across processes without
 * drawing random bytes on every request (that showed up in the hot-path profile).
 */
const REQUEST_PREFIX = 'req_' + randomBytes(6).toString('hex');
let requestCounter = 0;

export function newRequestId(): string {
  requestCounter = (requestCounter + 1) % 0x1000000000000;
  return REQUEST_PREFIX + requestCounter.toString(16).padStart(12, '0');
}
