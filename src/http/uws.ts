import { STATUS_CODES } from 'node:http';
import uWS from 'uWebSockets.js';
import { guard, hasBody, internalErrorReply, NO_BODY } from './adapter-support.ts';
import { BodyQueue } from './body-queue.ts';
import { CloseCode } from './close-codes.ts';
import { CorkAnchor } from './uws-cork-anchor.ts';
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

/**
 * The uWebSockets.js engine, the only file that touches uWS types. uWS requests live only
 * during the synchronous callback, so everything is copied out before the first await; body
 * data goes only to an `onData` attached right away, and replies are written inside `cork`.
 */
export async function startUwsServer(options: HttpEngineOptions): Promise<HttpServer> {
  const colocated = options.colocate ? await options.colocate('uws') : null;
  // Colocated, the other protocol made the app and registered its WebSocket route `/*` on it.
  const app = (colocated?.uwsApp as uWS.TemplatedApp | undefined) ?? uWS.App();
  let inFlight = 0;
  let drained: (() => void) | null = null;
  const lifecycle = { closing: false };
  const anchor = options.upgrade ? new CorkAnchor() : null;
  anchor?.register(app);

  app.any('/*', (res, req) => {
    const exchange = new Exchange(res, req);
    inFlight++;
    void respond(res, exchange, options, lifecycle).finally(() => {
      inFlight--;
      if (inFlight === 0) drained?.();
    });
  });

  const sockets = new Set<uWS.WebSocket<SocketData>>();
  const upgrade = options.upgrade;
  if (upgrade) {
    // uWS picks the most specific pattern, and the later registration among equals: beside a
    // colocated `/*` our endpoints register by their own paths.
    const patterns = colocated ? (options.webSocketPaths ?? []) : ['/*'];
    for (const pattern of patterns) app.ws<SocketData>(pattern, {
      maxPayloadLength: options.maxWebSocketMessageBytes ?? DEFAULT_WS_MESSAGE_BYTES,
      maxBackpressure: options.maxWebSocketBufferBytes ?? DEFAULT_WS_BUFFER_BYTES,
      idleTimeout: 120,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        const exchange = new Exchange(res, req);
        const key = req.getHeader('sec-websocket-key');
        const protocol = req.getHeader('sec-websocket-protocol');
        const extensions = req.getHeader('sec-websocket-extensions');
        void decideUpgrade(upgrade, exchange, options).then((decision) => {
          if (exchange.aborted) return;
          exchange.finished = true;
          if (!isWebSocketHandler(decision)) {
            res.cork(() => {
              writeHead(res, decision.status, decision.headers);
              res.end(decision.body, true);
            });
            return;
          }
          // Inside the anchor's cork: see CorkAnchor for the uWS bug this avoids.
          (anchor as CorkAnchor).run(() =>
            res.cork(() => res.upgrade<SocketData>({ handler: decision, session: null }, key, protocol, extensions, context)),
          );
        });
      },
      open: (ws) => {
        sockets.add(ws);
        const data = ws.getUserData();
        data.session = uwsSession(ws);
        later(options, () => data.handler.onOpen(data.session as WebSocketSession));
      },
      message: (ws, message, isBinary) => {
        const data = ws.getUserData();
        // The ArrayBuffer is neutered when this callback returns: copy it now.
        const bytes = new Uint8Array(message.slice(0));
        later(options, () => data.handler.onMessage(data.session as WebSocketSession, bytes, isBinary));
      },
      close: (ws, code, message) => {
        sockets.delete(ws);
        const data = ws.getUserData();
        data.closed = true;
        const reason = Buffer.from(message).toString('utf8');
        later(options, () => data.handler.onClose(code, reason));
      },
    });
  }

  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(options.host, options.port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`uWebSockets.js could not listen on ${options.host}:${options.port}`));
    });
  });

  const port = uWS.us_socket_local_port(listenSocket);
  await anchor?.connect(options.host, port);

  return {
    engine: 'uws',
    port,
    async close(graceMs) {
      lifecycle.closing = true;
      anchor?.close();
      uWS.us_listen_socket_close(listenSocket);
      // The server's actors are idle by now (they drain first): sockets have nothing more to
      // get here, so they go at once and reconnect elsewhere, not after the HTTP drain.
      for (const ws of sockets) ws.cork(() => ws.end(CloseCode.goingAway, 'server shutting down'));
      if (inFlight > 0) {
        await Promise.race([
          new Promise<void>((resolve) => (drained = resolve)),
          new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref()),
        ]);
      }
      // uWS flushes writes corked outside its own callbacks at the end of a loop turn: let the
      // last replies leave before the forced close.
      await new Promise((resolve) => setImmediate(resolve));
      app.close();
    },
  };
}

/**
 * One request's copy of what uWS gives only during its callback, and the state of its reply.
 * A class, not a closure-built object: a small GET allocates a few objects instead of a dozen
 * closures. Only the headers are copied eagerly; the abort signal, query and remote address
 * are made when first asked for (most GETs never ask).
 */
class Exchange implements HttpRequest {
  readonly method: string;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: Record<string, string> = {};
  readonly body: AsyncIterable<Uint8Array>;
  /** The queue behind `body`; null for requests without one. */
  readonly queue: BodyQueue | null = null;
  aborted = false;
  /** The reply ended: uWS forbids touching `res` after that (or after an abort). */
  finished = false;
  onWritable: ((ok: boolean) => void) | null = null;
  readonly #res: uWS.HttpResponse;
  #controller: AbortController | null = null;
  #query: URLSearchParams | null = null;
  #remoteAddress: string | null = null;

  constructor(res: uWS.HttpResponse, req: uWS.HttpRequest) {
    this.#res = res;
    res.onAborted(() => this.#abort());
    const headers = this.headers;
    req.forEach((name, value) => {
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    });
    this.method = req.getCaseSensitiveMethod().toUpperCase();
    this.path = req.getUrl();
    this.rawQuery = req.getQuery() ?? '';
    if (hasBody(this.method, headers)) {
      const queue = new BodyQueue({ highWaterMark: BODY_HIGH_WATER_MARK, onDrain: () => this.usable && res.resume() });
      this.queue = queue;
      res.onData((chunk, isLast) => {
        // The ArrayBuffer is neutered when this callback returns: copy it. Data can still
        // arrive after an early reply; it is dropped with the connection.
        if (chunk.byteLength > 0 && !queue.push(Buffer.from(new Uint8Array(chunk))) && this.usable) res.pause();
        if (isLast) queue.end();
      });
    }
    this.body = this.queue ?? NO_BODY;
  }

  get usable(): boolean {
    return !this.aborted && !this.finished;
  }

  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.rawQuery));
  }

  get remoteAddress(): string {
    if (this.#remoteAddress === null) this.#remoteAddress = this.usable ? Buffer.from(this.#res.getRemoteAddressAsText()).toString() : '';
    return this.#remoteAddress;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.aborted) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  #abort(): void {
    this.aborted = true;
    this.#controller?.abort();
    this.queue?.fail(new Error('the client closed the connection'));
    this.onWritable?.(false);
  }
}

async function respond(res: uWS.HttpResponse, exchange: Exchange, options: HttpEngineOptions, lifecycle: { closing: boolean }): Promise<void> {
  let reply: HttpReply;
  try {
    reply = await options.handler(exchange);
  } catch (err) {
    reply = internalErrorReply(options, err);
  }
  if (exchange.aborted) return;
  if (isStreamReply(reply)) {
    await stream(res, exchange, reply.status, reply.headers, reply.stream, options);
    return;
  }
  // Close after replying while shutting down, or when part of the body was left unread
  // (413, or a route that ignores it) so it is not parsed as the next request.
  const close = reply.closeConnection === true || lifecycle.closing || (exchange.queue !== null && !exchange.queue.complete);
  const { body } = reply;
  res.cork(() => {
    writeHead(res, reply.status, reply.headers);
    res.end(body, close);
  });
  exchange.finished = true;
}

async function stream(
  res: uWS.HttpResponse,
  exchange: Exchange,
  status: number,
  headers: Record<string, string>,
  produce: (sink: ReplySink) => Promise<void>,
  options: HttpEngineOptions,
): Promise<void> {
  res.onWritable(() => {
    const resume = exchange.onWritable;
    exchange.onWritable = null;
    resume?.(true);
    return true;
  });
  // The head leaves with the first chunk when that comes within this loop turn (a /v1 stream
  // has it already): one write and one packet less before the first content. Otherwise it
  // leaves on its own, so the client sees the status before a slow first chunk.
  let headWritten = false;
  const head = () => {
    headWritten = true;
    writeHead(res, status, headers);
  };
  const flushHead = setImmediate(() => {
    if (headWritten || exchange.aborted) return;
    res.cork(() => {
      head();
      res.write(''); // sends the head now, in chunked encoding
    });
  });
  const sink: ReplySink = {
    write(chunk) {
      if (exchange.aborted) return false;
      let accepted = true;
      res.cork(() => {
        if (!headWritten) head();
        accepted = res.write(chunk);
      });
      // uWS took the chunk but buffered it: wait until the socket drains before the next one.
      if (accepted) return true;
      return new Promise<boolean>((resolve) => (exchange.onWritable = resolve));
    },
  };
  try {
    await produce(sink);
  } catch (err) {
    options.onAdapterError(err);
  } finally {
    clearImmediate(flushHead);
    if (!exchange.aborted) {
      res.cork(() => {
        if (!headWritten) head();
        res.end();
      });
    }
    exchange.finished = true;
  }
}

/**
 * Runs a WebSocket callback on Node's own loop: uWS calls its ws handlers without draining
 * process.nextTick work afterwards, which stalls libraries that rely on it (postgres.js did)
 * until some unrelated event. setImmediate keeps the callbacks in order.
 */
function later(options: HttpEngineOptions, fn: () => void): void {
  setImmediate(() => guard(options, fn));
}

interface SocketData {
  handler: WebSocketHandler;
  session: WebSocketSession | null;
  closed?: boolean;
}

async function decideUpgrade(
  upgrade: NonNullable<HttpEngineOptions['upgrade']>,
  exchange: Exchange,
  options: HttpEngineOptions,
): Promise<WebSocketHandler | BufferedReply> {
  try {
    return await upgrade(exchange);
  } catch (err) {
    return internalErrorReply(options, err);
  }
}

function uwsSession(ws: uWS.WebSocket<SocketData>): WebSocketSession {
  const data = ws.getUserData();
  return {
    send(text) {
      if (data.closed) return false;
      // Sends come from outside uWS' callbacks (timers, promises): each is corked on its own
      // socket, as uWS asks, so its bytes never share a cork buffer with another socket's
      // writes. 0: buffered under backpressure, 1: sent, 2: dropped (over maxBackpressure).
      let status = 1;
      ws.cork(() => (status = ws.send(text, false)));
      return status !== 2;
    },
    close(code: number = CloseCode.normal, reason = '') {
      if (!data.closed) ws.cork(() => ws.end(code, reason));
    },
    get bufferedAmount() {
      return data.closed ? 0 : ws.getBufferedAmount();
    },
  };
}

/** `200 OK` and the like, made once per status rather than per reply. */
const statusLines = new Map<number, string>();

function writeHead(res: uWS.HttpResponse, status: number, headers: Record<string, string>): void {
  let line = statusLines.get(status);
  if (line === undefined) {
    line = `${status} ${STATUS_CODES[status] ?? ''}`;
    statusLines.set(status, line);
  }
  res.writeStatus(line);
  for (const name in headers) res.writeHeader(name, headers[name] as string);
}
