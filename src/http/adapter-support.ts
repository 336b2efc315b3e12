import type { BufferedReply, HttpEngineOptions } from './types.ts';

/** The reply when a handler itself failed: the core normally maps errors, so this is a last resort. */
export const INTERNAL_ERROR_BODY = '{"error":{"message":"Internal error","type":"api_error","param":null,"code":"internal_error"}}';

/** Reports a handler's own failure and answers 500 (both engines, HTTP and upgrades). */
export function internalErrorReply(options: HttpEngineOptions, err: unknown): BufferedReply {
  options.onAdapterError(err);
  return { status: 500, headers: { 'content-type': 'application/json' }, body: INTERNAL_ERROR_BODY };
}

/** One failing WebSocket handler must never take the process down. */
export function guard(options: HttpEngineOptions, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    options.onAdapterError(err);
  }
}

/** The body of every request that has none: already complete, shared. */
export const NO_BODY: AsyncIterable<Uint8Array> = { [Symbol.asyncIterator]: () => ({ next: async () => ({ done: true, value: undefined }) }) };

/** Whether a request carries a body to read (GET, HEAD and OPTIONS never do here). */
export function hasBody(method: string, headers: Record<string, string | string[] | undefined>): boolean {
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return false;
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
