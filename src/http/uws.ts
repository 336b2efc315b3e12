import { STATUS_CODES } from 'node:http';
import uWS from 'uWebSockets.js';
import { TroupeError } from '../errors.ts';
import type { HttpEngineOptions, HttpReply, HttpRequest, HttpServer } from './types.ts';

/**
 * The uWebSockets.js engine, the only file that touches uWS types. uWS requests live only
 * during the synchronous callback, so everything is copied out before the first await; the
 * body must be collected from `onData` right away, and replies are written inside `cork`.
 */
export async function startUwsServer(options: HttpEngineOptions & { maxBodyBytes: number }): Promise<HttpServer> {
  const app = uWS.App();
  let inFlight = 0;
  let drained: (() => void) | null = null;
  const lifecycle = { closing: false };

  app.any('/*', (res, req) => {
    const request = capture(res, req, options.maxBodyBytes);
    inFlight++;
    void respond(res, request, options, lifecycle).finally(() => {
      inFlight--;
      if (inFlight === 0) drained?.();
    });
  });

  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(options.host, options.port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`uWebSockets.js could not listen on ${options.host}:${options.port}`));
    });
  });

  return {
    engine: 'uws',
    port: uWS.us_socket_local_port(listenSocket),
    async close(graceMs) {
      lifecycle.closing = true;
      uWS.us_listen_socket_close(listenSocket);
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

interface Captured {
  request: HttpRequest;
  state: { aborted: boolean };
}

function capture(res: uWS.HttpResponse, req: uWS.HttpRequest, maxBodyBytes: number): Captured {
  const state = { aborted: false };
  const controller = new AbortController();
  res.onAborted(() => {
    state.aborted = true;
    controller.abort();
  });
  const headers: Record<string, string> = {};
  req.forEach((name, value) => {
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  });
  const method = req.getCaseSensitiveMethod().toUpperCase();
  const body = hasBody(method, headers) ? collectBody(res, headers, maxBodyBytes) : Promise.resolve(EMPTY);
  // A route may never read the body (e.g. 401 first); its rejection must not go unhandled.
  body.catch(() => {});
  const request: HttpRequest = {
    method,
    path: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    headers,
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
    signal: controller.signal,
    readBody: async (limit) => {
      const collected = await body;
      if (collected.length > limit) throw tooLarge(limit);
      return collected;
    },
  };
  return { request, state };
}

async function respond(res: uWS.HttpResponse, captured: Captured, options: HttpEngineOptions, lifecycle: { closing: boolean }): Promise<void> {
  let reply: HttpReply;
  try {
    reply = await options.handler(captured.request);
  } catch (err) {
    options.onAdapterError(err);
    reply = { status: 500, headers: { 'content-type': 'application/json' }, body: '{"error":{"message":"Internal error","type":"api_error","param":null,"code":"internal_error"}}' };
  }
  if (captured.state.aborted) return;
  res.cork(() => {
    res.writeStatus(`${reply.status} ${STATUS_CODES[reply.status] ?? ''}`);
    for (const [name, value] of Object.entries(reply.headers)) res.writeHeader(name, value);
    // While shutting down, tell keep-alive clients not to send more on this connection.
    res.end(reply.body, reply.closeConnection === true || lifecycle.closing);
  });
}

const EMPTY = new Uint8Array(0);

function hasBody(method: string, headers: Record<string, string>): boolean {
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return false;
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * uWS delivers body data only to a handler attached during the request callback, so the body is
 * collected eagerly, up to the engine-wide cap; routes then apply their own (smaller) limit.
 */
function collectBody(res: uWS.HttpResponse, headers: Record<string, string>, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    // Swallow the data; the 413 reply closes the connection.
    res.onData(() => {});
    return Promise.reject(tooLarge(maxBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    res.onData((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > maxBytes) {
        failed = true;
        reject(tooLarge(maxBytes));
        return;
      }
      // The ArrayBuffer is neutered when this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    });
  });
}

function tooLarge(limit: number): TroupeError {
  return new TroupeError('payload_too_large', `The request body is larger than the ${limit}-byte limit.`);
}
