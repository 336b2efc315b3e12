/**
 * Baseline of bench:http: the smallest node:http or uWebSockets.js server (argv[2]: node | uws; uws
 * needs a Node that can load it) answering every GET with BENCH_BODY (the real Character JSON, so
 * both send Troupe's bytes). Prints `{"msg":"bare listening","engine":E,"port":N}`.
 */
import { createServer } from 'node:http';
import { envNumber } from './env.ts';
import { listenAndAnnounce } from './serve.ts';

const body = process.env.BENCH_BODY ?? '{}';
const port = envNumber('BENCH_PORT', 0, 0);
const contentType = 'application/json; charset=utf-8';

if (process.argv[2] === 'uws') {
  const { default: uWS } = await import('uWebSockets.js');
  const app = uWS.App();
  // A synchronous reply inside the handler: uWS corks it already.
  app.get('/*', (res) => void res.writeHeader('content-type', contentType).end(body));
  app.any('/*', (res) => void res.writeStatus('405 Method Not Allowed').end());
  app.listen('127.0.0.1', port, (socket) => {
    if (!socket) throw new Error(`bare uWS server could not listen on 127.0.0.1:${port}`);
    const stop = () => (uWS.us_listen_socket_close(socket), app.close(), process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.stdout.write(`${JSON.stringify({ msg: 'bare listening', engine: 'uws', port: uWS.us_socket_local_port(socket) })}\n`);
  });
} else {
  const headers = { 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)) };
  const reply = Buffer.from(body);
  const server = createServer((req, res) => (req.method === 'GET' ? res.writeHead(200, headers).end(reply) : res.writeHead(405).end()));
  listenAndAnnounce(server, port, 'bare listening', { engine: 'node' });
}
