import type { Server as NodeHttpServer } from 'node:http';

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
  /** The query string as sent (without `?`), still percent-encoded. */
  readonly rawQuery: string;
  /** Lower-case header names; repeated headers joined with ', '. */
  readonly headers: Readonly<Record<string, string>>;
  readonly remoteAddress: string;
  /** Aborted when the client goes away before the reply is written. */
  readonly signal: AbortSignal;
  /**
   * The body as it arrives, readable once, with backpressure: the engine stops reading from the
   * socket while the consumer is behind. Stopping early leaves the rest unread; the reply then
   * closes the connection. See `readBody` in body.ts for the size-capped whole-body read.
   */
  body: AsyncIterable<Uint8Array>;
}

/** A reply whose body is known in full. */
export interface BufferedReply {
  status: number;
  headers: Record<string, string>;
  body: string | Uint8Array;
  /** Close the connection after this reply (e.g. an oversized body we stopped reading). */
  closeConnection?: boolean;
}

/** Where a streamed reply writes; e.g. server-sent events. */
export interface ReplySink {
  /**
   * True once the engine can take more, false when the client is gone: at once when the chunk
   * went out (no promise per chunk on the hot path), as a promise while the socket drains.
   * Awaiting every write bounds what the server buffers for a slow reader to about one chunk.
   */
  write(chunk: string | Uint8Array): boolean | Promise<boolean>;
}

/** A reply streamed after its head; `stream` returns when the body is complete. */
export interface StreamReply {
  status: number;
  headers: Record<string, string>;
  stream: (sink: ReplySink) => Promise<void>;
}

export type HttpReply = BufferedReply | StreamReply;

export function isStreamReply(reply: HttpReply): reply is StreamReply {
  return 'stream' in reply;
}

export type HttpHandler = (request: HttpRequest) => Promise<HttpReply>;

/** One open WebSocket, as handlers see it. */
export interface WebSocketSession {
  /** Queues a text frame. False when the socket is closed or its send buffer is over the limit (the frame is dropped). */
  send(text: string): boolean;
  close(code?: number, reason?: string): void;
  /** Bytes queued and not yet sent. */
  readonly bufferedAmount: number;
}

/** What a route does with an accepted WebSocket. Handlers must not throw; errors are reported, not fatal. */
export interface WebSocketHandler {
  onOpen(session: WebSocketSession): void;
  /** `data` is the frame's bytes as received: text frames are not decoded (or validated) yet. */
  onMessage(session: WebSocketSession, data: Uint8Array, isBinary: boolean): void;
  onClose(code: number, reason: string): void;
}

/**
 * Decides an upgrade before it happens: a handler accepts it, a reply refuses it (e.g. 401),
 * so bad credentials never get a socket.
 */
export type UpgradeHandler = (request: HttpRequest) => Promise<WebSocketHandler | BufferedReply>;

export function isWebSocketHandler(value: WebSocketHandler | BufferedReply): value is WebSocketHandler {
  return 'onOpen' in value;
}

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
  /** Decides WebSocket upgrade requests; without it, they reach `handler` like any request. */
  upgrade?: UpgradeHandler;
  /** Largest WebSocket message accepted, in bytes; larger ones close the socket (1009). */
  maxWebSocketMessageBytes?: number;
  /** Send buffer per socket past which frames are dropped, in bytes. */
  maxWebSocketBufferBytes?: number;
  /** Called for a failure inside the adapter itself; the adapter still answers 500. */
  onAdapterError: (err: unknown) => void;
  /**
   * Another protocol served on the same port (Colyseus' transport for game clients). Made once
   * the engine is chosen. With it, `webSocketPaths` lists the paths `upgrade` serves.
   */
  colocate?: (engine: 'uws' | 'node') => Promise<Colocation>;
  /** Route patterns (`/conversations/:conversationId/ws`) of our own WebSocket endpoints. */
  webSocketPaths?: readonly string[];
}

/** A second protocol on the engine's port; the engine leaves its upgrade paths alone. */
export interface Colocation {
  claimsUpgrade(path: string): boolean;
  /** node:http: attaches its upgrade listener to the server before it listens. */
  attachNode?(server: NodeHttpServer): void;
  /** uWS: the app it made and put its WebSocket route on; the engine serves on that app. */
  uwsApp?: unknown;
}
