/**
 * The floor for one extra Node hop: a bare node:http proxy that forwards every request to the
 * upstream on a keep-alive agent and pipes the reply back, touching neither body. Run as a child:
 * BENCH_UPSTREAM_PORT (required), BENCH_PORT (default 0); prints `{"msg":"pipe listening","port":N}`.
 */
import { Agent, createServer, request } from 'node:http';
import { envNumber } from './env.ts';
import { listenAndAnnounce } from './serve.ts';

const PIPE_READY_MSG = 'pipe listening';
const upstreamPort = envNumber('BENCH_UPSTREAM_PORT', 0, 0);
const agent = new Agent({ keepAlive: true, maxSockets: 4096, scheduling: 'lifo' });

const server = createServer((req, res) => {
  const headers = { ...req.headers, host: `127.0.0.1:${upstreamPort}` };
  const forward = request({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers, agent }, (reply) => {
    res.writeHead(reply.statusCode ?? 502, reply.headers);
    reply.pipe(res);
  });
  forward.on('error', () => res.destroy());
  res.on('close', () => {
    if (!res.writableFinished) forward.destroy();
  });
  req.pipe(forward);
});

if (upstreamPort === 0) throw new Error('BENCH_UPSTREAM_PORT is required');
listenAndAnnounce(server, envNumber('BENCH_PORT', 0, 0), PIPE_READY_MSG);
