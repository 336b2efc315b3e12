/**
 * The benchmarks' one fake OpenAI-compatible upstream, run as its own process so its work is not
 * on the load generator's event loop (replies: upstream-reply.ts). A non-streamed reply is sent at
 * once; a streamed one writes its first frame at once and the others a gap apart.
 * Environment: BENCH_UPSTREAM_PORT (0: any free port), BENCH_REPLY (fixed | echo),
 * BENCH_REPLY_TOKENS (40), BENCH_REPLY_GAP_MS (0: all in one tick), BENCH_STAMP_TOKENS (40),
 * BENCH_STAMP_GAP_MS (5), BENCH_EMBED_DIMENSIONS (256, for /v1/embeddings).
 * Prints `{"msg":"bench upstream listening","port":N,...}` once it listens.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { BENCH_MODEL, chunkFrame, completionBody, DONE_FRAME, echoReplyTokens, fixedReplyTokens, LAST_BODY_PATH, replyFrames, STAMP_PREFIX, stampText, UPSTREAM_READY_MSG } from './upstream-reply.ts';
import { envNumber } from './env.ts';
import { listenAndAnnounce, readBody, sendError, sendJson } from './serve.ts';

const echo = process.env.BENCH_REPLY === 'echo';
const replyTokens = envNumber('BENCH_REPLY_TOKENS', 40, 0);
const replyGapMs = envNumber('BENCH_REPLY_GAP_MS', 0, 0);
const stampTokens = Math.max(1, envNumber('BENCH_STAMP_TOKENS', 40, 0));
const stampGapMs = envNumber('BENCH_STAMP_GAP_MS', 5, 0);
const dimensions = envNumber('BENCH_EMBED_DIMENSIONS', 256, 0);
const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' };
const MODELS = JSON.stringify({ object: 'list', data: [{ id: BENCH_MODEL, object: 'model', created: 1_700_000_000, owned_by: 'troupe-bench' }] });

/** Fixed-reply frames per model, built once. */
const framesByModel = new Map<string, Buffer[]>();
let lastFixedBody: string | null = null;
let stampedStreams = 0;

function lastUserText(messages: unknown): string {
  const m = (Array.isArray(messages) ? messages : []).findLast((x: { role?: unknown } | null) => x?.role === 'user') as { content?: unknown } | undefined;
  if (typeof m?.content === 'string') return m.content;
  return Array.isArray(m?.content) ? (m.content as { text?: unknown }[]).map((p) => (typeof p?.text === 'string' ? p.text : '')).join('') : '';
}

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST' && path === '/v1/chat/completions') return chat(req, res);
  if (req.method === 'POST' && path === '/v1/embeddings') return embeddings(req, res);
  if (req.method === 'GET' && path === '/v1/models') return sendJson(res, 200, MODELS);
  if (req.method === 'GET' && path === '/bench/stats') return sendJson(res, 200, JSON.stringify({ stampedStreams }));
  if (req.method === 'GET' && path === LAST_BODY_PATH) {
    const body = lastFixedBody;
    lastFixedBody = null;
    return body === null ? sendError(res, 404, 'no fixed-reply request since the last call') : sendJson(res, 200, body);
  }
  req.resume();
  sendError(res, 404, `Invalid URL (${req.method} ${path})`);
});

function parse(raw: string, res: ServerResponse): { model: string; messages?: unknown; stream?: unknown; input?: unknown } | null {
  try {
    const body = JSON.parse(raw) as { model?: unknown } | null;
    if (typeof body?.model === 'string') return body as { model: string };
  } catch {
    // answered below
  }
  sendError(res, 400, "We could not parse the JSON body of your request, or it has no 'model'.");
  return null;
}

function chat(req: IncomingMessage, res: ServerResponse): void {
  readBody(req, (bytes) => {
    const raw = bytes.toString('utf8');
    const body = parse(raw, res);
    if (!body) return;
    const said = lastUserText(body.messages);
    if (said.startsWith(STAMP_PREFIX)) {
      if (body.stream !== true) return sendError(res, 400, 'stamped replies are streamed only');
      return streamStamped(res, body.model, ++stampedStreams);
    }
    if (echo) {
      const tokens = echoReplyTokens(said, replyTokens);
      if (body.stream !== true) return sendJson(res, 200, completionBody(body.model, tokens));
      // The finish chunk goes with [DONE], as a real stream's last frames do.
      const frames = replyFrames(body.model, tokens);
      return pump(res, frames.length - 1, (i) => (i === frames.length - 2 ? frames[i]! + DONE_FRAME : frames[i]!), replyGapMs);
    }
    lastFixedBody = raw;
    if (body.stream !== true) return sendJson(res, 200, completionBody(body.model, fixedReplyTokens(replyTokens)));
    let frames = framesByModel.get(body.model);
    if (!frames) {
      frames = replyFrames(body.model, fixedReplyTokens(replyTokens)).map((f) => Buffer.from(f));
      if (framesByModel.size < 16) framesByModel.set(body.model, frames);
    }
    const all = frames;
    pump(res, all.length, (i) => all[i] ?? DONE_FRAME, replyGapMs);
  });
}

/** Deterministic unit vectors from the text's hash: the same input always embeds the same. */
function embeddings(req: IncomingMessage, res: ServerResponse): void {
  readBody(req, (bytes) => {
    const body = parse(bytes.toString('utf8'), res);
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
  });
}

/** Writes `count` frames one after the other, `gapMs` apart (0: all in this tick), honouring backpressure. */
function pump(res: ServerResponse, count: number, frameAt: (i: number) => Buffer | string, gapMs: number): void {
  let next = 0;
  let timer: NodeJS.Timeout | null = null;
  let gone = false;
  let waitingDrain = false;
  res.on('close', () => ((gone = true), timer && clearTimeout(timer)));
  res.on('drain', () => {
    if (!waitingDrain || gone) return;
    waitingDrain = false;
    step();
  });
  res.writeHead(200, SSE_HEADERS);
  const step = (): void => {
    timer = null;
    while (!gone) {
      if (next >= count) return void res.end();
      if (!res.write(frameAt(next++))) return void (waitingDrain = true);
      if (gapMs > 0 && next < count) return void (timer = setTimeout(step, gapMs));
    }
  };
  step();
}

/** Role chunk, `stampTokens` chunks each stamped just before it is written, finish and [DONE]; the gap is between content chunks. */
function streamStamped(res: ServerResponse, model: string, n: number): void {
  const head = { id: `chatcmpl-convbench-stamp${n}`, created: Math.floor(Date.now() / 1000), model };
  const role = chunkFrame(head, { role: 'assistant', content: '' }, null);
  const finish = chunkFrame(head, {}, 'stop') + DONE_FRAME;
  pump(res, stampTokens, (i) => (i === 0 ? role : '') + chunkFrame(head, { content: stampText(i, process.hrtime.bigint() / 1000n) }, null) + (i === stampTokens - 1 ? finish : ''), stampGapMs);
}

listenAndAnnounce(server, envNumber('BENCH_UPSTREAM_PORT', 0, 0), UPSTREAM_READY_MSG, { reply: echo ? 'echo' : 'fixed', replyTokens, replyGapMs, stampTokens, stampGapMs });
