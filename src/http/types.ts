/**
 * The plain request/response shapes every engine adapter translates to. Routes and the app
 * core see only these; engine types (uWS, node:http) never leave their adapter file.
 */
export interface HttpRequest {
  /** Upper-case method. */
  readonly method: string;
  /** Path without the query string, not decoded. */
  readonly path: string;
  readonly query: URLSearchParams;
  /** Lower-case header names; repeated headers joined with ', '. */
  readonly headers: Readonly<Record<string, string>>;
  readonly remoteAddress: string;
  /** Aborted when the client goes away before the reply is written. */
  readonly signal: AbortSignal;
  /**
   * Reads the whole body. Rejects with a `payload_too_large` TroupeError as soon as more than
   * `limit` bytes arrive (or Content-Length announces more); the rest is not buffered.
   */
  readBody(limit: number): Promise<Uint8Array>;
}

export interface HttpReply {
  status: number;
  headers: Record<string, string>;
  body: string | Uint8Array;
  /** Close the connection after this reply (e.g. an oversized body we stopped reading). */
  closeConnection?: boolean;
}

export type HttpHandler = (request: HttpRequest) => Promise<HttpReply>;

/** A running server on one engine. */
export interface HttpServer {
  readonly engine: 'uws' | 'node';
  readonly port: number;
  /** Stops accepting, waits up to `graceMs` for in-flight requests, then closes every connection. */
  close(graceMs: number): Promise<void>;
}

export interface HttpEngineOptions {
  host: string;
  port: number;
  handler: HttpHandler;
  /** Called for a failure inside the adapter itself; the adapter still answers 500. */
  onAdapterError: (err: unknown) => void;
}
