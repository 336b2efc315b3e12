import { STATUS_CODES, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TroupeError } from '../errors.ts';
import type { HttpEngineOptions, HttpReply, HttpRequest, HttpServer } from './types.ts';

/** The node:http engine: used where uWebSockets.js cannot load (e.g. glibc < 2.38). */
export async function startNodeServer(options: HttpEngineOptions): Promise<HttpServer> {
  let inFlight = 0;
  let drained: (() => void) | null = null;

  const server = createServer((req, res) => {
    inFlight++;
    void serve(req, res, options).finally(() => {
      inFlight--;
      if (inFlight === 0) drained?.();
    });
  });
  // Keep-alive sockets idle longer than typical client pools so clients do not race a close.
  server.keepAliveTimeout = 65_000;

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
      if (inFlight > 0) {
        await Promise.race([
          new Promise<void>((resolve) => (drained = resolve)),
          new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref()),
        ]);
      }
      server.closeAllConnections();
      await closed;
    },
  };
}

async function serve(req: IncomingMessage, res: ServerResponse, options: HttpEngineOptions): Promise<void> {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  let reply: HttpReply;
  try {
    reply = await options.handler(toRequest(req, controller.signal));
  } catch (err) {
    options.onAdapterError(err);
    reply = { status: 500, headers: { 'content-type': 'application/json' }, body: '{"error":{"message":"Internal error","type":"api_error","param":null,"code":"internal_error"}}' };
  }
  if (res.destroyed) return;
  if (reply.closeConnection) reply.headers.connection = 'close';
  reply.headers['content-length'] = String(typeof reply.body === 'string' ? Buffer.byteLength(reply.body) : reply.body.byteLength);
  res.writeHead(reply.status, STATUS_CODES[reply.status] ?? '', reply.headers);
  res.end(reply.body);
}

function toRequest(req: IncomingMessage, signal: AbortSignal): HttpRequest {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return {
    method: (req.method ?? 'GET').toUpperCase(),
    path: q === -1 ? url : url.slice(0, q),
    query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)),
    headers,
    remoteAddress: req.socket.remoteAddress ?? '',
    signal,
    readBody: (limit) => readBody(req, limit),
  };
}

function readBody(req: IncomingMessage, limit: number): Promise<Uint8Array> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // Stop reading; the reply closes the connection so the rest is never buffered.
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

function tooLarge(limit: number): TroupeError {
  return new TroupeError('payload_too_large', `The request body is larger than the ${limit}-byte limit.`);
}
