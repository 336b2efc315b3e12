/** What the benchmarks' small servers (the fake upstream, the pipe proxy, the bare baselines) share. */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export function sendJson(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** An error in OpenAI's shape. */
export const sendError = (res: ServerResponse, status: number, message: string): void =>
  sendJson(res, status, JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } }));

export function readBody(req: IncomingMessage, done: (body: Buffer) => void): void {
  const parts: Buffer[] = [];
  req.on('data', (part: Buffer) => parts.push(part));
  req.on('end', () => done(Buffer.concat(parts)));
}

/**
 * Listens on 127.0.0.1:`port`, stops on SIGTERM/SIGINT, and prints `{"msg":<readyMsg>,"port":N,...info}`
 * (what children.ts launch() waits for). Keep-alive outlasts any client pool's idle time, so
 * clients never race a keep-alive close (the same 65 s as Troupe's node engine).
 */
export function listenAndAnnounce(server: Server, port: number, readyMsg: string, info: Record<string, unknown> = {}): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.listen(port, '127.0.0.1', () => {
    const stop = () => (server.closeAllConnections(), server.close(() => process.exit(0)));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.stdout.write(`${JSON.stringify({ msg: readyMsg, ...info, port: (server.address() as AddressInfo).port })}\n`);
  });
}
