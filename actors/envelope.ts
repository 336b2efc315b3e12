import { ERROR_CODES, TroupeError, unavailable, type ErrorCode } from '../src/errors.ts';

/**
 * What an actor method returns. Calls may cross processes as JSON, where a thrown TroupeError
 * would lose its code, so failures travel as data and are thrown again on the caller's side.
 */
export type Envelope<T> =
  | { ok: true; value: T }
  | { ok: false; error: { code: ErrorCode; message: string; param: string | null; detailCode: string; reported?: boolean } }
  /** The actor is being disposed: make it again and retry. */
  | { ok: false; retry: true };

export function failure(err: unknown): Envelope<never> {
  const error = err instanceof TroupeError ? err : (unavailable(err) ?? new TroupeError('internal_error', 'The conversation failed unexpectedly.'));
  return { ok: false, error: { code: error.code, message: error.message, param: error.param, detailCode: error.detailCode, reported: error.reported } };
}

/** The value, or the failure thrown as the TroupeError it was. */
export function unwrap<T>(envelope: Exclude<Envelope<T>, { retry: true }>): T {
  if (envelope.ok) return envelope.value;
  const { code, message, param, detailCode, reported } = envelope.error;
  const headers: Record<string, string> = code === 'database_unavailable' || code === 'redis_unavailable' ? { 'retry-after': '2' } : {};
  throw new TroupeError(code in ERROR_CODES ? code : 'internal_error', message, { param, detailCode, headers, reported: reported === true });
}
