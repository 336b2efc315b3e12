import { TroupeError } from '../errors.ts';

/**
 * The one rule for text at Troupe's boundaries (HTTP bodies and query strings, conversation
 * WebSocket frames, Colyseus room messages): bytes must be valid UTF-8, strings must be
 * well-formed Unicode without NUL, and values nest at most `MAX_DEPTH` deep. PostgreSQL refuses
 * NUL in text and jsonb, a lone surrogate would be stored as U+FFFD, and very deep values
 * overflow the stack of recursive code further in; refusing them here means what is stored is
 * always exactly what was sent.
 */

/** Deeper JSON than any request of the interface needs (tool parameter schemas included). */
const MAX_DEPTH = 64;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Decodes UTF-8, refusing invalid bytes instead of replacing them with U+FFFD. */
export function decodeUtf8(bytes: Uint8Array, what = 'The request body'): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new TroupeError('invalid_request', `${what} is not valid UTF-8; send text encoded as UTF-8.`, { detailCode: 'invalid_utf8' });
  }
}

/** A query string whose percent-encoded bytes are not UTF-8 is refused, like such a body. */
export function checkPercentEncoding(rawQuery: string): void {
  for (const part of rawQuery.split('&')) {
    try {
      decodeURIComponent(part.replaceAll('+', ' '));
    } catch {
      throw new TroupeError('invalid_request', 'The query string is not valid percent-encoded UTF-8.', { detailCode: 'invalid_utf8' });
    }
  }
}

/** Where a problem sits, as OpenAI's `param` reads: `messages[2].content`. */
type PathPart = string | number;

/** A value on the walk, linked to its parent so a path is built only for an error. */
interface Node {
  value: unknown;
  key: PathPart | null;
  parent: Node | null;
  depth: number;
}

/**
 * Throws a 400 naming the first string (or object key) holding NUL or a lone surrogate, or the
 * first value nested deeper than `MAX_DEPTH`. Iterative, so hostile depth cannot overflow it;
 * it runs on every body, so nothing but one small node per value is allocated.
 */
export function checkText(value: unknown, root: readonly PathPart[] = []): void {
  const stack: Node[] = [{ value, key: null, parent: null, depth: 0 }];
  for (let node = stack.pop(); node; node = stack.pop()) {
    const current = node.value;
    if (typeof current === 'string') {
      if (!isCleanText(current)) checkString(current, pathOf(root, node));
      continue;
    }
    if (typeof current !== 'object' || current === null) continue;
    if (node.depth >= MAX_DEPTH) {
      const param = formatParam(pathOf(root, node));
      throw new TroupeError('invalid_request', `Invalid '${param}': nested more than ${MAX_DEPTH} levels deep.`, {
        param: param || null,
        detailCode: 'nested_too_deeply',
      });
    }
    const depth = node.depth + 1;
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push({ value: current[i], key: i, parent: node, depth });
      continue;
    }
    const keys = Object.keys(current);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string;
      const child: Node = { value: (current as Record<string, unknown>)[key], key, parent: node, depth };
      if (!isCleanText(key)) checkString(key, pathOf(root, child));
      stack.push(child);
    }
  }
}

function isCleanText(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

function pathOf(root: readonly PathPart[], node: Node): PathPart[] {
  const parts: PathPart[] = [];
  for (let n: Node | null = node; n && n.key !== null; n = n.parent) parts.push(n.key);
  return [...root, ...parts.reverse()];
}

function checkString(text: string, path: readonly PathPart[]): void {
  if (text.includes('\u0000')) {
    const param = formatParam(path);
    throw new TroupeError('invalid_request', `Invalid '${param}': text may not contain the NUL character (\\u0000).`, {
      param: param || null,
      detailCode: 'null_character',
    });
  }
  if (!text.isWellFormed()) {
    const param = formatParam(path);
    throw new TroupeError('invalid_request', `Invalid '${param}': text holds a lone UTF-16 surrogate, which is not a character.`, {
      param: param || null,
      detailCode: 'invalid_unicode',
    });
  }
}

/** `['parameters', 0, 'name']` -> `parameters[0].name`; unprintable key characters are escaped. */
export function formatParam(path: readonly PathPart[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else {
      const name = escapeControl(part);
      out += out ? `.${name}` : name;
    }
  }
  return out;
}

function escapeControl(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f]|\p{Cs}/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Model output is not user input: NUL in it is dropped rather than failing the stored reply. */
export function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '') : text;
}
