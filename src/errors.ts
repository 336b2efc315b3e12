/**
 * The one error type of Troupe. Domain code throws `TroupeError` with a code; each boundary
 * (REST/OpenAI body, later the WebSocket error event) maps it once using the table below.
 */
export const ERROR_CODES = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  unknown_parameter: { status: 400, type: 'invalid_request_error' },
  invalid_reference: { status: 400, type: 'invalid_request_error' },
  missing_api_key: { status: 401, type: 'authentication_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  invalid_admin_token: { status: 401, type: 'authentication_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  route_not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  conflict: { status: 409, type: 'invalid_request_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  upgrade_required: { status: 426, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'api_error' },
  upstream_unavailable: { status: 502, type: 'api_error' },
  upstream_error: { status: 502, type: 'api_error' },
  service_unavailable: { status: 503, type: 'api_error' },
  database_unavailable: { status: 503, type: 'api_error' },
  redis_unavailable: { status: 503, type: 'api_error' },
  invalid_webhook_signature: { status: 401, type: 'authentication_error' },
  livekit_error: { status: 502, type: 'api_error' },
  livekit_not_configured: { status: 503, type: 'api_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface TroupeErrorOptions {
  /** The request field the error is about, e.g. `capabilityGroupIds[1]`. */
  param?: string | null;
  /** A more specific machine-readable code for the body, e.g. `character_not_found`. */
  detailCode?: string;
  cause?: unknown;
  /** Extra response headers, e.g. `allow` on 405. */
  headers?: Record<string, string>;
  /** Every listener of the conversation was already sent this error as an `error` event. */
  reported?: boolean;
}

export class TroupeError extends Error {
  override name = 'TroupeError';
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly detailCode: string;
  readonly headers: Record<string, string>;
  readonly reported: boolean;

  constructor(code: ErrorCode, message: string, options: TroupeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.param = options.param ?? null;
    this.detailCode = options.detailCode ?? code;
    this.headers = options.headers ?? {};
    this.reported = options.reported ?? false;
  }

  /** The same error, marked as already sent to the conversation's listeners. */
  asReported(): TroupeError {
    return new TroupeError(this.code, this.message, { param: this.param, detailCode: this.detailCode, headers: this.headers, reported: true, cause: this.cause });
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }
}

/** 404 for a resource of the caller's project; foreign ids look exactly like missing ones. */
export function notFound(kind: string, id: string, param: string | null = null): TroupeError {
  return new TroupeError('not_found', `No ${kind} with id '${id}' exists.`, {
    param,
    detailCode: `${kind}_not_found`,
  });
}

/**
 * An error as live clients receive it (conversation WebSocket, Colyseus room message `error`):
 * the interface's `{type, message}` plus the REST body's `code` and `param` (additions).
 */
export interface ErrorEvent {
  type: 'error';
  message: string;
  code: string;
  param: string | null;
}

/** How long clients are told to wait before retrying while the database or Redis does not answer. */
const DATABASE_RETRY_AFTER_S = '2';
/** Connection-level failures: the database is down or unreachable, not the query at fault (the last two from db/query-deadline.ts). */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'ACQUIRE_TIMEOUT', 'QUERY_DEADLINE']);
/** SQLSTATEs of a server that is shutting down or not accepting connections yet. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * A thrown value that means "the database does not answer" (seen through drizzle's wrapper and
 * postgres.js' errors), as the 503 it is: a client may retry, nothing was at fault in the request.
 */
function databaseUnavailable(err: unknown): TroupeError | null {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (CONNECTION_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08')) {
      return new TroupeError('database_unavailable', 'The database does not answer; try again shortly.', {
        cause: err,
        headers: { 'retry-after': DATABASE_RETRY_AFTER_S },
      });
    }
  }
  return null;
}

/** Whether `err` means the database does not answer (down, restarting, unreachable), not that the statement was at fault. */
export function isDatabaseUnavailable(err: unknown): boolean {
  return databaseUnavailable(err) !== null;
}

/** A thrown value from a Redis command that could not run because Redis does not answer (ioredis). */
function redisUnavailable(err: unknown): TroupeError | null {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e.name === 'MaxRetriesPerRequestError' || /^(Command timed out|Connection is closed\.|Stream isn't writeable)/.test(e.message)) {
      return new TroupeError('redis_unavailable', 'Redis (REDIS_URL) does not answer; try again shortly.', {
        cause: err,
        headers: { 'retry-after': DATABASE_RETRY_AFTER_S },
      });
    }
  }
  return null;
}

/** What a failure of a dependency means to the caller: a 503 it may retry, or null. */
export function unavailable(err: unknown): TroupeError | null {
  return redisUnavailable(err) ?? databaseUnavailable(err);
}

/** Maps any thrown value to the `error` event of the live-client protocol. */
export function toErrorEvent(err: unknown, fallback = 'The message could not be handled.'): ErrorEvent {
  if (!(err instanceof TroupeError)) err = unavailable(err) ?? err;
  if (err instanceof TroupeError) return { type: 'error', message: err.message, code: err.detailCode, param: err.param };
  return { type: 'error', message: fallback, code: 'internal_error', param: null };
}

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/** Maps any thrown value to the OpenAI-style body used on every HTTP endpoint. */
export function toErrorBody(err: unknown, requestId: string): { status: number; body: ErrorBody; headers: Record<string, string> } {
  if (!(err instanceof TroupeError)) err = unavailable(err) ?? err;
  if (err instanceof TroupeError) {
    return {
      status: err.status,
      headers: err.headers,
      body: {
        error: { message: err.message, type: ERROR_CODES[err.code].type, param: err.param, code: err.detailCode },
      },
    };
  }
  return {
    status: 500,
    headers: {},
    body: {
      error: {
        message: `The server had an error while processing your request. Include the request id ${requestId} when reporting it.`,
        type: 'api_error',
        param: null,
        code: 'internal_error',
      },
    },
  };
}
