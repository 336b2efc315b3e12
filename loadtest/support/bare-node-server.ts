/**
 * Baseline: the smallest node:http server that answers every GET with the JSON body in
 * BENCH_BODY (the benchmark passes the real Character JSON, so both send the same bytes).
 * Listens on 127.0.0.1 and an ephemeral port unless BENCH_PORT is set; prints
 * `{"msg":"bare listening","engine":"node","port":N}`.
 */
import { createServer } from 'node:http';
import { intEnv, listenAndAnnounce } from './serve.ts';

const body = Buffer.from(process.env.BENCH_BODY ?? '{}');
const port = intEnv('BENCH_PORT', 0);
const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(body.byteLength) };

const server = createServer((req, res) => {
  if (req.method !== 'GET') {
    res.writeHead(405).end();
    return;
  }
  res.writeHead(200, headers);
  res.end(body);
});
// Same keep-alive setting as Troupe's node engine (65 s).
listenAndAnnounce(server, port, 'bare listening', { engine: 'node' });
