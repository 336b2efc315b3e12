/**
 * What the benchmarks' fake OpenAI-compatible upstreams (chat-support/upstream-server.ts,
 * conversation-support/upstream.ts) and the bare baseline server share: JSON and error replies,
 * reading their settings, listening on 127.0.0.1 and announcing the port, stopping on a signal,
 * and being started as a child of the benchmark.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { launch, type Launched } from './children.ts';
import { troupeEnv } from './troupe-env.ts';

/** An integer >= 0 from the environment, or `fallback` when unset. */
export function intEnv(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be an integer >= 0, got '${raw}'`);
  return value;
}

export const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };

/** GET /v1/models with the one model an upstream serves. */
export function modelsBody(model: string, ownedBy: string): string {
  return JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', created: 1_700_000_000, owned_by: ownedBy }] });
}

export function sendJson(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** An error in OpenAI's shape. */
export function sendError(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } }));
}

export function notFound(req: IncomingMessage, res: ServerResponse, path: string): void {
  req.resume();
  sendError(res, 404, `Invalid URL (${req.method} ${path})`);
}

/** The whole request body, then `done` with it. */
export function readBody(req: IncomingMessage, done: (body: Buffer) => void): void {
  const parts: Buffer[] = [];
  req.on('data', (part: Buffer) => parts.push(part));
  req.on('end', () => done(Buffer.concat(parts)));
}

/**
 * Listens on 127.0.0.1:`port` (0: any free port), stops on SIGTERM/SIGINT, and prints
 * `{"msg":<readyMsg>,"port":N,...info}` on stdout once it listens (what launch() waits for).
 * Keep-alive outlasts any client pool's idle time, so clients never race a keep-alive close.
 */
export function listenAndAnnounce(server: Server, port: number, readyMsg: string, info: Record<string, unknown> = {}): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.listen(port, '127.0.0.1', () => {
    const stop = () => {
      server.closeAllConnections();
      server.close(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    const { port: bound } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ msg: readyMsg, ...info, port: bound })}\n`);
  });
}

/** Starts an upstream script (relative to loadtest/) with this Node, on any free port. */
export function launchUpstream(options: { loadtestDir: string; script: string; env: Record<string, string>; readyMsg: string; cwd: string }): Promise<Launched> {
  return launch({
    name: 'upstream',
    command: process.execPath,
    args: [join(options.loadtestDir, options.script)],
    env: troupeEnv({ BENCH_UPSTREAM_PORT: '0', ...options.env }),
    cwd: options.cwd,
    readyMsg: options.readyMsg,
    readyTimeoutMs: 30_000,
  });
}
