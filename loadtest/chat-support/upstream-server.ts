/**
 * Benchmark upstream for the chat-stream load test: a lean OpenAI-compatible server (node:http)
 * that answers every chat completion with the same reply of BENCH_TOKENS tokens, one SSE event
 * per token, BENCH_CHUNK_DELAY_MS apart (0: all events written back to back in one tick).
 *
 * Unlike test/support/openai/fake-upstream.ts it records nothing and serialises nothing per
 * request (the frames are built once per model), so it stays cheap at thousands of streams per
 * second and needs no per-request scripting. It runs as its own process, so its work is not
 * on the load generator's event loop.
 *
 * Environment: BENCH_UPSTREAM_PORT (default 0), BENCH_TOKENS (default 40), BENCH_CHUNK_DELAY_MS
 * (default 5), BENCH_FIRST_CHUNK_DELAY_MS (default 0: time before the first event, a stand-in
 * for prompt processing). Prints `{"msg":"chat bench upstream listening","port":N}` on stdout.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { intEnv, listenAndAnnounce, modelsBody, notFound, readBody, sendError, sendJson, SSE_HEADERS } from '../support/fake-upstream.ts';
import { BENCH_MODEL, completionBody, monotonicMs, sseFrames, TAG_PREFIX, TIMINGS_PATH, UPSTREAM_READY_MSG, type UpstreamTiming } from './reply.ts';

const port = intEnv('BENCH_UPSTREAM_PORT', 0);
const tokens = intEnv('BENCH_TOKENS', 40);
const chunkDelayMs = intEnv('BENCH_CHUNK_DELAY_MS', 5);
const firstChunkDelayMs = intEnv('BENCH_FIRST_CHUNK_DELAY_MS', 0);
const PROMPT_TOKENS = 64;

/** Timings of tagged requests, until the load generator collects them (bounded, in case it never does). */
const timings = new Map<string, UpstreamTiming>();
const MAX_TIMINGS = 500_000;

const frameCache = new Map<string, Buffer[]>();
function framesFor(model: string, includeUsage: boolean): Buffer[] {
  const key = `${includeUsage ? 1 : 0}${model}`;
  let frames = frameCache.get(key);
  if (!frames) {
    frames = sseFrames({ model, tokens, includeUsage, promptTokens: PROMPT_TOKENS });
    if (frameCache.size < 64) frameCache.set(key, frames);
  }
  return frames;
}

const MODELS_BODY = modelsBody(BENCH_MODEL, 'troupe-bench');

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method === 'GET' && path === '/v1/models') return sendJson(res, 200, MODELS_BODY);
  if (req.method === 'POST' && path === '/v1/chat/completions') return chat(req, res);
  if (req.method === 'GET' && path === TIMINGS_PATH) {
    const body = JSON.stringify(Object.fromEntries(timings));
    timings.clear();
    return sendJson(res, 200, body);
  }
  notFound(req, res, path ?? '/');
});

function chat(req: IncomingMessage, res: ServerResponse): void {
  readBody(req, (raw) => {
    const arrived = monotonicMs();
    let body: { model?: unknown; user?: unknown; stream?: unknown; stream_options?: { include_usage?: unknown } };
    try {
      body = JSON.parse(raw.toString('utf8')) as typeof body;
    } catch {
      return sendError(res, 400, 'We could not parse the JSON body of your request.');
    }
    if (typeof body !== 'object' || body === null || typeof body.model !== 'string') {
      return sendError(res, 400, "Missing required parameter: 'model'.");
    }
    const options = { model: body.model, tokens, includeUsage: body.stream_options?.include_usage === true, promptTokens: PROMPT_TOKENS };
    if (body.stream !== true) return sendJson(res, 200, completionBody(options));
    let timing: UpstreamTiming | null = null;
    if (typeof body.user === 'string' && body.user.startsWith(TAG_PREFIX) && timings.size < MAX_TIMINGS) {
      timing = { arrived, first: 0, last: 0 };
      timings.set(body.user, timing);
    }
    stream(res, framesFor(options.model, options.includeUsage), timing);
  });
}

/** Writes the frames with a fixed gap, honouring backpressure and stopping when the client leaves. */
function stream(res: ServerResponse, frames: Buffer[], timing: UpstreamTiming | null): void {
  let next = 0;
  let timer: NodeJS.Timeout | null = null;
  let gone = false;
  let ended = false;
  const finish = (): void => {
    if (ended) return;
    ended = true;
    res.end();
    if (timing) timing.last = monotonicMs();
  };
  res.on('close', () => {
    gone = true;
    if (timer) clearTimeout(timer);
  });
  res.on('drain', () => {
    if (!gone && !ended && timer === null) schedule();
  });
  res.writeHead(200, SSE_HEADERS);

  const writeNext = (): void => {
    timer = null;
    // With no delay every frame goes out in this tick (the socket coalesces what it can).
    do {
      const frame = frames[next++];
      if (frame === undefined) return finish();
      const accepted = res.write(frame);
      if (timing && timing.first === 0) timing.first = monotonicMs();
      if (!accepted) return; // 'drain' resumes
    } while (chunkDelayMs === 0);
    schedule();
  };
  const schedule = (): void => {
    if (next >= frames.length) return finish();
    timer = setTimeout(writeNext, chunkDelayMs);
  };
  if (firstChunkDelayMs > 0) {
    res.flushHeaders();
    timer = setTimeout(writeNext, firstChunkDelayMs);
  } else {
    writeNext();
  }
}

listenAndAnnounce(server, port, UPSTREAM_READY_MSG, { tokens, chunkDelayMs, firstChunkDelayMs });
