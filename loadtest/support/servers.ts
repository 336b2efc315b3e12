/**
 * The benchmarks' small servers, each a child process of its own so its work is not on the load
 * generator's event loop (started by upstream.ts startServer; argv[2] says which):
 *   upstream   the one fake OpenAI-compatible upstream (replies: upstream.ts). A non-streamed reply
 *              is sent at once; a streamed one writes its first frame at once, the others a gap apart.
 *              BENCH_REPLY (fixed | echo), BENCH_REPLY_TOKENS (40), BENCH_REPLY_GAP_MS (0: one tick),
 *              BENCH_STAMP_TOKENS (40), BENCH_STAMP_GAP_MS (5), BENCH_EMBED_DIMENSIONS (256).
 *   pipe       the floor for one extra Node hop: forwards to BENCH_UPSTREAM_PORT on a keep-alive
 *              agent and pipes the reply back, touching neither body.
 *   bare node|uws  the smallest server answering every GET with BENCH_BODY (the bench:http baseline).
 * Each prints `{"msg":"bench server listening","port":N,...}`; BENCH_PORT (0: any free port).
 */
import { createHash } from 'node:crypto';
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { envNumber } from './env.ts';
import * as wire from './upstream.ts';

const port = envNumber('BENCH_PORT', 0, 0);
const announce = (info: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ msg: wire.SERVER_READY_MSG, ...info })}\n`);

function sendJson(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** An error in OpenAI's shape. */
const sendError = (res: ServerResponse, status: number, message: string): void =>
  sendJson(res, status, JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } }));

function readBody(req: IncomingMessage, done: (body: Buffer) => void): void {
  const parts: Buffer[] = [];
  req.on('data', (part: Buffer) => parts.push(part));
  req.on('end', () => done(Buffer.concat(parts)));
}

/** Keep-alive outlasts any client pool's idle time (Troupe's node engine uses the same 65 s). */
function listen(handler: (req: IncomingMessage, res: ServerResponse) => void, info: Record<string, unknown> = {}): void {
  const server = createServer(handler);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.listen(port, '127.0.0.1', () => {
    const stop = () => (server.closeAllConnections(), server.close(() => process.exit(0)));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    announce({ ...info, port: (server.address() as AddressInfo).port });
  });
}

function pipe(): void {
  const upstreamPort = envNumber('BENCH_UPSTREAM_PORT', 0, 0);
  if (upstreamPort === 0) throw new Error('BENCH_UPSTREAM_PORT is required');
  const agent = new Agent({ keepAlive: true, maxSockets: 4096, scheduling: 'lifo' });
  listen((req, res) => {
    const headers = { ...req.headers, host: `127.0.0.1:${upstreamPort}` };
    const forward = request({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers, agent }, (reply) => {
      res.writeHead(reply.statusCode ?? 502, reply.headers);
      reply.pipe(res);
    });
    forward.on('error', () => res.destroy());
    res.on('close', () => !res.writableFinished && forward.destroy());
    req.pipe(forward);
  });
}

async function bare(engine: string): Promise<void> {
  const body = process.env.BENCH_BODY ?? '{}';
  const contentType = 'application/json; charset=utf-8';
  if (engine !== 'uws') {
    const headers = { 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)) };
    const reply = Buffer.from(body);
    return listen((req, res) => {
      if (req.method === 'GET') res.writeHead(200, headers).end(reply);
      else res.writeHead(405).end();
    }, { engine });
  }
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
    announce({ engine, port: uWS.us_socket_local_port(socket) });
  });
}

function upstream(): void {
  const echo = process.env.BENCH_REPLY === 'echo';
  const replyTokens = envNumber('BENCH_REPLY_TOKENS', 40, 0);
  const replyGapMs = envNumber('BENCH_REPLY_GAP_MS', 0, 0);
  const stampTokens = Math.max(1, envNumber('BENCH_STAMP_TOKENS', 40, 0));
  const stampGapMs = envNumber('BENCH_STAMP_GAP_MS', 5, 0);
  const dimensions = envNumber('BENCH_EMBED_DIMENSIONS', 256, 0);
  const sse = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };
  const model = { id: wire.BENCH_MODEL, object: 'model', created: 1_700_000_000, owned_by: 'troupe-bench' };
  const models = JSON.stringify({ object: 'list', data: [model] });
  const framesByModel = new Map<string, Buffer[]>();
  let lastFixedBody: string | null = null;
  let stampedStreams = 0;
  /** Writes `count` frames `gapMs` apart (0: all in this tick), honouring backpressure. */
  const pump = (res: ServerResponse, count: number, frameAt: (i: number) => Buffer | string, gapMs: number): void => {
    let next = 0;
    let timer: NodeJS.Timeout | null = null;
    let gone = false;
    let waitingDrain = false;
    res.on('close', () => ((gone = true), timer && clearTimeout(timer)));
    res.on('drain', () => waitingDrain && !gone && ((waitingDrain = false), step()));
    res.writeHead(200, sse);
    const step = (): void => {
      timer = null;
      while (!gone) {
        if (next >= count) return void res.end();
        if (!res.write(frameAt(next++))) return void (waitingDrain = true);
        if (gapMs > 0 && next < count) return void (timer = setTimeout(step, gapMs));
      }
    };
    step();
  };
  /** Role chunk, stamped chunks (each stamped just before it is written), finish and [DONE]. */
  const streamStamped = (res: ServerResponse, model: string, n: number): void => {
    const head = { id: `chatcmpl-convbench-stamp${n}`, created: Math.floor(Date.now() / 1000), model };
    const role = wire.chunkFrame(head, { role: 'assistant', content: '' }, null);
    const finish = wire.chunkFrame(head, {}, 'stop') + wire.DONE_FRAME;
    const stamped = (i: number) => wire.chunkFrame(head, { content: wire.stampText(i, process.hrtime.bigint() / 1000n) }, null);
    pump(res, stampTokens, (i) => (i === 0 ? role : '') + stamped(i) + (i === stampTokens - 1 ? finish : ''), stampGapMs);
  };
  const parse = (raw: string, res: ServerResponse): { model: string; messages?: unknown; stream?: unknown; input?: unknown } | null => {
    try {
      const body = JSON.parse(raw) as { model?: unknown } | null;
      if (typeof body?.model === 'string') return body as { model: string };
    } catch {
      // answered below
    }
    sendError(res, 400, "We could not parse the JSON body of your request, or it has no 'model'.");
    return null;
  };
  const chat = (raw: string, res: ServerResponse): void => {
    const body = parse(raw, res);
    if (!body) return;
    const said = wire.lastUserText(body.messages);
    if (said.startsWith(wire.STAMP_PREFIX)) {
      if (body.stream !== true) return sendError(res, 400, 'stamped replies are streamed only');
      return streamStamped(res, body.model, ++stampedStreams);
    }
    if (echo) {
      const tokens = wire.echoReplyTokens(said, replyTokens);
      if (body.stream !== true) return sendJson(res, 200, wire.completionBody(body.model, tokens));
      // The finish chunk goes with [DONE], as a real stream's last frames do.
      const frames = wire.replyFrames(body.model, tokens);
      return pump(res, frames.length - 1, (i) => (i === frames.length - 2 ? frames[i]! + wire.DONE_FRAME : frames[i]!), replyGapMs);
    }
    lastFixedBody = raw;
    if (body.stream !== true) return sendJson(res, 200, wire.completionBody(body.model, wire.fixedReplyTokens(replyTokens)));
    let frames = framesByModel.get(body.model);
    if (!frames) {
      frames = wire.replyFrames(body.model, wire.fixedReplyTokens(replyTokens)).map((f) => Buffer.from(f));
      if (framesByModel.size < 16) framesByModel.set(body.model, frames);
    }
    const all = frames;
    pump(res, all.length, (i) => all[i] ?? wire.DONE_FRAME, replyGapMs);
  };
  /** Deterministic unit vectors from the text's hash: the same input always embeds the same. */
  const embeddings = (raw: string, res: ServerResponse): void => {
    const body = parse(raw, res);
    if (!body) return;
    const inputs = (Array.isArray(body.input) ? body.input : [body.input]).map(String);
    const data = inputs.map((text, index) => {
      const seed = createHash('sha256').update(text).digest();
      const v = Array.from({ length: dimensions }, (_, i) => (seed[i % 32] ?? 0) / 128 - 1 + Math.sin(i + (seed[0] ?? 0)));
      const norm = Math.hypot(...v) || 1;
      return { object: 'embedding', index, embedding: v.map((x) => x / norm) };
    });
    const tokens = inputs.reduce((sum, t) => sum + Math.ceil(t.length / 4), 0);
    sendJson(res, 200, JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } }));
  };
  const info = { reply: echo ? 'echo' : 'fixed', replyTokens, replyGapMs, stampTokens, stampGapMs };
  listen((req, res) => {
    const route = `${req.method} ${(req.url ?? '/').split('?')[0]}`;
    if (route === 'POST /v1/chat/completions') return readBody(req, (b) => chat(b.toString('utf8'), res));
    if (route === 'POST /v1/embeddings') return readBody(req, (b) => embeddings(b.toString('utf8'), res));
    if (route === 'GET /v1/models') return sendJson(res, 200, models);
    if (route === `GET ${wire.LAST_BODY_PATH}`) {
      const body = lastFixedBody;
      lastFixedBody = null;
      return body === null ? sendError(res, 404, 'no fixed-reply request since the last call') : sendJson(res, 200, body);
    }
    req.resume();
    sendError(res, 404, `Invalid URL (${route})`);
  }, info);
}

const kind = process.argv[2];
if (kind === 'upstream') upstream();
else if (kind === 'pipe') pipe();
else if (kind === 'bare') await bare(process.argv[3] ?? 'node');
else throw new Error(`servers.ts: unknown server '${kind}' (upstream | pipe | bare node|uws)`);
