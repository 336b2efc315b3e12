import type { HttpEngineOptions } from './types.ts';

/** The reply when a handler itself failed: the core normally maps errors, so this is a last resort. */
export const INTERNAL_ERROR_BODY = '{"error":{"message":"Internal error","type":"api_error","param":null,"code":"internal_error"}}';

/** One failing WebSocket handler must never take the process down. */
export function guard(options: HttpEngineOptions, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    options.onAdapterError(err);
  }
}
