/**
 * The benchmarks' fake OpenAI-compatible upstream, run as its own process so its work is not on
 * the load generator's event loop. See upstream-reply.ts for the two kinds of reply. A
 * non-streamed reply is sent at once; a streamed one writes its first frame at once and the
 * others BENCH_REPLY_GAP_MS apart.
 *
 * Environment:
 *   BENCH_UPSTREAM_PORT   port on 127.0.0.1 (default 0: any free one)
 *   BENCH_REPLY_TOKENS    tokens of the fixed reply (default 40)
 *   BENCH_REPLY_GAP_MS    gap between the fixed reply's chunks (default 0: all written in one tick)
 *   BENCH_STAMP_TOKENS    content chunks of a stamped stream (default 40)
 *   BENCH_STAMP_GAP_MS    gap between stamped chunks (default 5)
 * Prints `{"msg":"conversations bench upstream listening","port":N}` on stdout once it listens.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { intEnv, listenAndAnnounce, modelsBody, notFound, readBody, sendError, sendJson, SSE_HEADERS } from './fake-upstream.ts';
import {
  BENCH_MODEL,
  chunkFrame,
  DONE_FRAME,
  fixedCompletion,
  fixedFrames,
  LAST_BODY_PATH,
  STAMP_PREFIX,
  stampText,
  UPSTREAM_READY_MSG,
} from './upstream-reply.ts';

const port = intEnv('BENCH_UPSTREAM_PORT', 0);
const replyTokens = intEnv('BENCH_REPLY_TOKENS', 40);
const replyGapMs = intEnv('BENCH_REPLY_GAP_MS', 0);
const stampTokens = Math.max(1, intEnv('BENCH_STAMP_TOKENS', 40));
const stampGapMs = intEnv('BENCH_STAMP_GAP_MS', 5);

const MODELS_BODY = modelsBody(BENCH_MODEL, 'troupe-bench');

/** Fixed-reply frames per model, built once. */
const framesByModel = new Map<string, Buffer[]>();
function framesFor(model: string): Buffer[] {
  let frames = framesByModel.get(model);
  if (!frames) {
    frames = fixedFrames(model, replyTokens).map((f) => Buffer.from(f));
    if (framesByModel.size < 16) framesByModel.set(model, frames);
  }
  return frames;
}

let lastFixedBody: string | null = null;
let stampedStreams = 0;

/** Content of the last user message, as text. */
function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown } | null;
    if (m?.role !== 'user') continue;
    if (typeof m.content === 'string') return m.content;
    if (Array.isArray(m.content)) {
      return (m.content as { text?: unknown }[]).map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
    }
    return '';
  }
  return '';
}

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'POST' && path === '/v1/chat/completions') return chat(req, res);
  if (req.method === 'GET' && path === '/v1/models') return sendJson(res, 200, MODELS_BODY);
  if (req.method === 'GET' && path === LAST_BODY_PATH) {
    const body = lastFixedBody;
    lastFixedBody = null;
    if (body === null) return sendError(res, 404, 'no fixed-reply request since the last call');
    return sendJson(res, 200, body);
  }
  if (req.method === 'GET' && path === '/bench/stats') return sendJson(res, 200, JSON.stringify({ stampedStreams }));
  notFound(req, res, path ?? '/');
});

function chat(req: IncomingMessage, res: ServerResponse): void {
  readBody(req, (bytes) => {
    const raw = bytes.toString('utf8');
    let body: { model?: unknown; messages?: unknown; stream?: unknown };
    try {
      body = JSON.parse(raw) as typeof body;
    } catch {
      return sendError(res, 400, 'We could not parse the JSON body of your request.');
    }
    if (typeof body !== 'object' || body === null || typeof body.model !== 'string') return sendError(res, 400, "Missing required parameter: 'model'.");
    const model = body.model;
    if (lastUserText(body.messages).startsWith(STAMP_PREFIX)) {
      if (body.stream !== true) return sendError(res, 400, 'stamped replies are streamed only');
      stampedStreams++;
      return streamStamped(res, model);
    }
    lastFixedBody = raw;
    if (body.stream !== true) return sendJson(res, 200, fixedCompletion(model, replyTokens));
    return streamFixed(res, framesFor(model));
  });
}

/** Writes frames one after the other, `gapMs` apart (0: all in this tick), honouring backpressure. */
function pump(res: ServerResponse, count: number, frameAt: (i: number) => Buffer | string, gapMs: number): void {
  let next = 0;
  let timer: NodeJS.Timeout | null = null;
  let gone = false;
  let waitingDrain = false;
  res.on('close', () => {
    gone = true;
    if (timer) clearTimeout(timer);
  });
  res.on('drain', () => {
    if (!waitingDrain || gone) return;
    waitingDrain = false;
    step();
  });
  res.writeHead(200, SSE_HEADERS);
  const step = (): void => {
    timer = null;
    while (!gone) {
      if (next >= count) {
        res.end();
        return;
      }
      const ok = res.write(frameAt(next++));
      if (!ok) {
        waitingDrain = true;
        return;
      }
      if (gapMs > 0 && next < count) {
        timer = setTimeout(step, gapMs);
        return;
      }
    }
  };
  step();
}

function streamFixed(res: ServerResponse, frames: Buffer[]): void {
  pump(res, frames.length, (i) => frames[i] ?? DONE_FRAME, replyGapMs);
}

/**
 * Role chunk, `stampTokens` stamped content chunks (each stamped just before it is written),
 * finish chunk, [DONE]. The gap applies between content chunks; role and finish go with their
 * neighbours.
 */
function streamStamped(res: ServerResponse, model: string): void {
  const head = { id: `chatcmpl-convbench-stamp${stampedStreams}`, created: Math.floor(Date.now() / 1000), model };
  const role = chunkFrame(head, { role: 'assistant', content: '' }, null);
  const finish = chunkFrame(head, {}, 'stop') + DONE_FRAME;
  pump(
    res,
    stampTokens,
    (i) => {
      const frame = chunkFrame(head, { content: stampText(i, process.hrtime.bigint() / 1000n) }, null);
      return (i === 0 ? role : '') + frame + (i === stampTokens - 1 ? finish : '');
    },
    stampGapMs,
  );
}

listenAndAnnounce(server, port, UPSTREAM_READY_MSG, { replyTokens, replyGapMs, stampTokens, stampGapMs });
