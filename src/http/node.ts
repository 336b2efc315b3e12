import { STATUS_CODES, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { guard, hasBody, internalErrorReply, NO_BODY } from './adapter-support.ts';
import { BodyQueue } from './body-queue.ts';
import { CloseCode } from './close-codes.ts';
import {
  isStreamReply,
  isWebSocketHandler,
  type BufferedReply,
  type HttpEngineOptions,
  type HttpReply,
  type HttpRequest,
  type HttpServer,
  type ReplySink,
  type WebSocketHandler,
  type WebSocketSession,
} from './types.ts';

const BODY_HIGH_WATER_MARK = 64 * 1024;
const DEFAULT_WS_MESSAGE_BYTES = 1024 * 1024;
const DEFAULT_WS_BUFFER_BYTES = 1024 * 1024;

/** The node:http engine: used where uWebSockets.js cannot load (e.g. glibc < 2.38). */
export async function startNodeServer(options: HttpEngineOptions): Promise<HttpServer> {
  const gate: InFlight = { count: 0, drained: null };
  const server = createServer((req, res) => void serve(req, res, options, gate));
  // Keep-alive sockets idle longer than typical client pools so clients do not race a close.
  server.keepAliveTimeout = 65_000;

  const sockets = new Set<WebSocket>();
  const upgrade = options.upgrade;
  const colocated = options.colocate ? await options.colocate('node') : null;
  colocated?.attachNode?.(server);
  if (upgrade) {
    // UTF-8 is checked by the protocol, which answers an `error` event instead of closing (1007).
    const wss = new WebSocketServer({ noServer: true, skipUTF8Validation: true, maxPayload: options.maxWebSocketMessageBytes ?? DEFAULT_WS_MESSAGE_BYTES });
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      if (colocated?.claimsUpgrade(splitUrl(req)[0])) return; // its own listener takes it
      void acceptUpgrade(req, socket, head, wss, sockets, options, upgrade);
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    engine: 'node',
    port: (server.address() as AddressInfo).port,
    async close(graceMs) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // The server's actors are idle by now (they drain first): sockets have nothing more to
      // get here, so they go at once and reconnect elsewhere, not after the HTTP drain.
      for (const ws of sockets) ws.close(CloseCode.goingAway, 'server shutting down');
      if (gate.count > 0) {
        await Promise.race([
          new Promise<void>((resolve) => (gate.drained = resolve)),
          new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref()),
        ]);
      }
      server.closeAllConnections();
      for (const ws of sockets) ws.terminate();
      await closed;
    },
  };
}

/** Requests being served, and who waits for the last one (a graceful close). */
interface InFlight {
  count: number;
  drained: (() => void) | null;
}

/** Counts itself in and out of `gate` rather than in a `.finally` per request, which cost a promise and two closures each. */
async function serve(req: IncomingMessage, res: ServerResponse, options: HttpEngineOptions, gate: InFlight): Promise<void> {
  gate.count++;
  try {
    const request = new NodeRequest(req, res);
    const body = request.queue;
    let reply: HttpReply;
    try {
      reply = await options.handler(request);
    } catch (err) {
      reply = internalErrorReply(options, err);
    }
    if (res.destroyed) return;
    if (isStreamReply(reply)) {
      await stream(res, reply.status, reply.headers, reply.stream, request.signal, options);
      return;
    }
    // A body we stopped reading (413, or a route that ignores it) must not be parsed as the next request.
    const unread = body !== null && !body.complete;
    if (reply.closeConnection || unread) reply.headers.connection = 'close';
    if (unread) lingerOnClose(res);
    // Bytes, not a string: the length is then known without a second pass, and node:http writes
    // them without converting (measured ~1 µs less per small reply).
    const bytes = typeof reply.body === 'string' ? Buffer.from(reply.body) : reply.body;
    reply.headers['content-length'] = String(bytes.byteLength);
    res.writeHead(reply.status, STATUS_CODES[reply.status] ?? '', reply.headers);
    res.end(bytes);
  } finally {
    if (--gate.count === 0) gate.drained?.();
  }
}

async function stream(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  produce: (sink: ReplySink) => Promise<void>,
  signal: AbortSignal,
  options: HttpEngineOptions,
): Promise<void> {
  res.writeHead(status, STATUS_CODES[status] ?? '', headers);
  // The head leaves with the first chunk when that comes within this loop turn (a /v1 stream
  // has it already): one write and one packet less before the first content. Otherwise it
  // leaves on its own, so the client sees the status before a slow first chunk.
  const flushHead = setImmediate(() => res.flushHeaders());
  const sink: ReplySink = {
    write(chunk) {
      clearImmediate(flushHead);
      if (signal.aborted || res.destroyed) return false;
      if (res.write(chunk)) return true;
      return new Promise<boolean>((resolve) => {
        const done = (ok: boolean) => {
          res.off('drain', onDrain);
          res.off('close', onClose);
          resolve(ok);
        };
        const onDrain = () => done(true);
        const onClose = () => done(false);
        res.on('drain', onDrain);
        res.on('close', onClose);
      });
    },
  };
  try {
    await produce(sink);
  } catch (err) {
    options.onAdapterError(err);
  } finally {
    clearImmediate(flushHead);
    if (!res.destroyed) res.end();
  }
}

async function acceptUpgrade(
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
  wss: WebSocketServer,
  sockets: Set<WebSocket>,
  options: HttpEngineOptions,
  upgrade: NonNullable<HttpEngineOptions['upgrade']>,
): Promise<void> {
  const controller = new AbortController();
  socket.on('close', () => controller.abort());
  socket.on('error', () => controller.abort());
  let decision: WebSocketHandler | BufferedReply;
  try {
    decision = await upgrade(new NodeRequest(req, null, controller.signal));
  } catch (err) {
    decision = internalErrorReply(options, err);
  }
  if (socket.destroyed) return;
  if (!isWebSocketHandler(decision)) {
    refuseUpgrade(socket, decision);
    return;
  }
  const handler = decision;
  wss.handleUpgrade(req, socket, head, (ws) => {
    sockets.add(ws);
    const session = nodeSession(ws, options.maxWebSocketBufferBytes ?? DEFAULT_WS_BUFFER_BYTES);
    guard(options, () => handler.onOpen(session));
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
      const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      guard(options, () => handler.onMessage(session, bytes, isBinary));
    });
    ws.on('close', (code: number, reason: Buffer) => {
      sockets.delete(ws);
      guard(options, () => handler.onClose(code, reason.toString('utf8')));
    });
    ws.on('error', () => {
      // A protocol error is followed by 'close', which reports it.
    });
  });
}

function nodeSession(ws: WebSocket, maxBuffer: number): WebSocketSession {
  return {
    send(text) {
      if (ws.readyState !== ws.OPEN || ws.bufferedAmount > maxBuffer) return false;
      ws.send(text);
      return true;
    },
    close(code: number = CloseCode.normal, reason = '') {
      ws.close(code, reason);
    },
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
  };
}

/** Answers a refused upgrade with a plain HTTP reply on the raw socket. */
function refuseUpgrade(socket: Socket, reply: BufferedReply): void {
  const body = typeof reply.body === 'string' ? Buffer.from(reply.body) : Buffer.from(reply.body);
  const head = [`HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ''}`];
  for (const [name, value] of Object.entries(reply.headers)) head.push(`${name}: ${value}`);
  head.push(`content-length: ${body.byteLength}`, 'connection: close', '', '');
  socket.end(Buffer.concat([Buffer.from(head.join('\r\n')), body]));
}

/** How long a closing connection keeps discarding what the client still sends. */
const LINGER_MS = 5_000;

/**
 * Lingering close for a reply sent before the request body ended (e.g. 413): closing at once
 * with unread bytes in flight makes the kernel reset the connection, and the client may lose
 * the reply. Instead the write side is closed after the reply and incoming bytes are discarded
 * (never buffered) until the client closes or LINGER_MS passes.
 */
function lingerOnClose(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket) return;
  // node:http calls destroySoon() once a `connection: close` reply has been written.
  socket.destroySoon = function lingeringClose(this: Socket) {
    this.end();
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.once('close', () => clearTimeout(timer));
    this.once('end', () => this.destroy());
    this.on('data', () => {});
    this.resume();
  };
}

/** The path and the raw query string of a request's URL. */
function splitUrl(req: IncomingMessage): [path: string, rawQuery: string] {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q === -1 ? [url, ''] : [url.slice(0, q), url.slice(q + 1)];
}

/**
 * The plain request of one exchange. A class, so a small GET allocates a few objects instead of
 * a dozen closures; only what every request needs is made at once. The abort signal, the body
 * queue (requests without a body share an empty one), the query and the remote address are
 * made when first asked for: most GETs never ask.
 */
class NodeRequest implements HttpRequest {
  readonly method: string;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: Record<string, string>;
  readonly body: AsyncIterable<Uint8Array>;
  /** The queue behind `body`; null for requests without one. */
  readonly queue: BodyQueue | null = null;
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse | null;
  #signal: AbortSignal | null;
  #query: URLSearchParams | null = null;

  /** `res` is null for upgrades (GETs, so without a body), whose `signal` is given. */
  constructor(req: IncomingMessage, res: ServerResponse | null, signal: AbortSignal | null = null) {
    this.#req = req;
    this.#res = res;
    this.#signal = signal;
    this.headers = headersOf(req);
    this.method = (req.method ?? 'GET').toUpperCase();
    [this.path, this.rawQuery] = splitUrl(req);
    if (hasBody(this.method, this.headers)) {
      const queue = new BodyQueue({ highWaterMark: BODY_HIGH_WATER_MARK, onDrain: () => req.resume() });
      this.queue = queue;
      req.on('data', (chunk: Buffer) => {
        if (!queue.push(chunk)) req.pause();
      });
      req.on('end', () => queue.end());
      req.on('error', (err) => queue.fail(err));
      this.signal.addEventListener('abort', () => queue.fail(new Error('the client closed the connection')));
    }
    this.body = this.queue ?? NO_BODY;
  }

  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.rawQuery));
  }

  get remoteAddress(): string {
    return this.#req.socket.remoteAddress ?? '';
  }

  /** Aborts when the connection closes before the reply has been written in full. */
  get signal(): AbortSignal {
    if (this.#signal) return this.#signal;
    const controller = new AbortController();
    this.#signal = controller.signal;
    const res = this.#res;
    if (!res) return this.#signal;
    if (res.closed) {
      if (!res.writableFinished) controller.abort();
    } else {
      res.once('close', () => !res.writableFinished && controller.abort());
    }
    return this.#signal;
  }
}

/** node:http already joins repeated headers with ', ' except `set-cookie`, which stays a list. */
function headersOf(req: IncomingMessage): Record<string, string> {
  const headers = req.headers;
  const cookies = headers['set-cookie'];
  if (cookies !== undefined) (headers as Record<string, string>)['set-cookie'] = cookies.join(', ');
  return headers as Record<string, string>;
}
