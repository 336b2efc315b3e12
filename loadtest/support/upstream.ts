/** The benchmarks' small servers, each a `node upstream.ts <kind>` child so its work stays off the load generator's loop: the fake
 * OpenAI-compatible upstream (stamped, echo or fixed replies), the pipe proxy (one extra Node hop) and the bare node|uws servers. */
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { childEnv, launch, parseJson, ROOT, type Launched } from './children.ts';
import { envNumber } from './env.ts';

export const BENCH_MODEL = 'fake-chat-1';
export const STAMP_PREFIX = '#stamp';
/** Returns (and forgets) the raw body of the last fixed-reply chat request. */
export const LAST_BODY_PATH = '/bench/last-fixed-body';
const READY_MSG = 'bench server listening';
/** Starts the server `kind` (upstream, pipe, bare node|uws) with these BENCH_* settings. */
export function startServer(kind: string[], settings: Record<string, string> = {}, command = process.execPath): Promise<Launched> {
  const args = ['loadtest/support/upstream.ts', ...kind];
  return launch({ name: kind.join('-'), command, args, env: childEnv(settings), cwd: ROOT, readyMsg: READY_MSG });
}
export const startUpstream = (settings: Record<string, string>): Promise<Launched> => startServer(['upstream'], settings);
const WORDS = ('Keep your voice down traveller the guards change at the bell and the east gate stays unwatched for as long as it ' +
  'takes to drink a mug of cider so be quick and bring me the lantern oil you promised').split(' ');
const ECHO_WORDS = ['and', 'so', 'the', 'story', 'goes', 'on', 'for', 'a', 'while', 'longer'];
const fixedReplyTokens = (tokens: number): string[] =>
  Array.from({ length: tokens }, (_, i) => `${i === 0 ? '' : ' '}${WORDS[i % WORDS.length]}`);
/** The body Troupe's POST /perform answers for the fixed reply. */
export const expectedPerformBody = (tokens: number): string =>
  JSON.stringify([{ type: 'text', content: fixedReplyTokens(tokens).join('').trim() }]);
export const echoedMessage = (content: string): string | null => /^Re: (\S+)/.exec(content)?.[1] ?? null;
export const parseStamps = (text: string): { index: number; micros: number }[] =>
  [...text.matchAll(/(\d+)@(\d+)/g)].map((m) => ({ index: Number(m[1]), micros: Number(m[2]) }));
/** The last user message's text, its content a string or text parts. */
function lastUserText(messages: unknown): string {
  const list = Array.isArray(messages) ? (messages as ({ role?: unknown; content?: unknown } | null)[]) : [];
  const content = list.findLast((x) => x?.role === 'user')?.content;
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? (content as { text?: unknown }[]).map((p) => (typeof p?.text === 'string' ? p.text : '')).join('') : '';
}
const DONE_FRAME = 'data: [DONE]\n\n';
function chunkFrame(head: { id: string; created: number; model: string }, delta: Record<string, unknown>, finish: string | null): string {
  const choices = [{ index: 0, delta, logprobs: null, finish_reason: finish }];
  return `data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', system_fingerprint: 'fp_conv_bench', choices })}\n\n`;
}
/** Role chunk, content chunks, finish chunk and [DONE]; `finishWithDone`: the last two in one frame, as a real stream's are. */
function replyFrames(model: string, tokens: readonly string[], finishWithDone: boolean): Buffer[] {
  const head = { id: 'chatcmpl-convbench-fixed', created: 1_700_000_000, model };
  const [role, finish] = [chunkFrame(head, { role: 'assistant', content: '' }, null), chunkFrame(head, {}, 'stop')];
  const content = tokens.map((c) => chunkFrame(head, { content: c }, null));
  return [role, ...content, ...(finishWithDone ? [finish + DONE_FRAME] : [finish, DONE_FRAME])].map((f) => Buffer.from(f));
}
const completionBody = (model: string, tokens: readonly string[]): string => JSON.stringify({
  id: 'chatcmpl-convbench-fixed', object: 'chat.completion', created: 1_700_000_000, model,
  choices: [{ index: 0, message: { role: 'assistant', content: tokens.join(''), refusal: null }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 50, completion_tokens: tokens.length, total_tokens: 50 + tokens.length },
});
const sendJson = (res: ServerResponse, status: number, text: string): void =>
  void res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
const sendError = (res: ServerResponse, status: number, message: string): void =>
  sendJson(res, status, JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } }));
function ready(info: Record<string, unknown>, stop: () => void): void {
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, stop);
  process.stdout.write(`${JSON.stringify({ msg: READY_MSG, ...info })}\n`);
}
/** Keep-alive outlasts any client pool's idle time (Troupe's node engine uses the same 65 s). */
function listen(handler: (req: IncomingMessage, res: ServerResponse) => void, info: Record<string, unknown> = {}): void {
  const server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 66_000 }, handler);
  server.listen(0, '127.0.0.1', () => {
    const stop = () => (server.closeAllConnections(), server.close(() => process.exit(0)));
    ready({ ...info, port: (server.address() as AddressInfo).port }, stop);
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
    const answer = (req: IncomingMessage, res: ServerResponse) =>
      void (req.method === 'GET' ? res.writeHead(200, headers).end(reply) : res.writeHead(405).end());
    return listen(answer, { engine });
  }
  const { default: uWS } = await import('uWebSockets.js');
  const app = uWS.App();
  // A synchronous reply inside the handler: uWS corks it already.
  app.get('/*', (res) => void res.writeHeader('content-type', contentType).end(body));
  app.any('/*', (res) => void res.writeStatus('405 Method Not Allowed').end());
  app.listen('127.0.0.1', 0, (socket) => {
    if (!socket) throw new Error('bare uWS server could not listen on 127.0.0.1');
    const stop = () => (uWS.us_listen_socket_close(socket), app.close(), process.exit(0));
    ready({ engine, port: uWS.us_socket_local_port(socket) }, stop);
  });
}
function upstream(): void {
  const echo = process.env.BENCH_REPLY === 'echo';
  const replyTokens = envNumber('BENCH_REPLY_TOKENS', 40, 0);
  const replyGapMs = envNumber('BENCH_REPLY_GAP_MS', 0, 0);
  const stampTokens = Math.max(1, envNumber('BENCH_STAMP_TOKENS', 40, 0));
  const stampGapMs = envNumber('BENCH_STAMP_GAP_MS', 5, 0);
  const fixedTokens = fixedReplyTokens(replyTokens);
  const echoWords = Array.from({ length: Math.max(0, replyTokens - 2) }, (_, i) => ECHO_WORDS[i % ECHO_WORDS.length] ?? '');
  const model = { id: BENCH_MODEL, object: 'model', created: 1_700_000_000, owned_by: 'troupe-bench' };
  const models = JSON.stringify({ object: 'list', data: [model] });
  const framesByModel = new Map<string, Buffer[]>();
  let [lastFixedBody, stampedStreams] = [null as string | null, 0];
  /** Writes `count` frames `gapMs` apart (0: all in this tick), honouring backpressure. */
  const pump = (res: ServerResponse, count: number, frameAt: (i: number) => Buffer | string, gapMs: number): void => {
    let [next, gone, waitingDrain] = [0, false, false];
    let timer: NodeJS.Timeout | null = null;
    res.on('close', () => ((gone = true), timer && clearTimeout(timer)));
    res.on('drain', () => waitingDrain && !gone && ((waitingDrain = false), step()));
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
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
  const chat = (raw: string, res: ServerResponse): void => {
    const body = parseJson(raw);
    const model = body?.model;
    if (typeof model !== 'string') return sendError(res, 400, "We could not parse the JSON body of your request, or it has no 'model'.");
    const said = lastUserText(body?.messages);
    const stream = body?.stream === true;
    if (said.startsWith(STAMP_PREFIX)) {
      if (!stream) return sendError(res, 400, 'stamped replies are streamed only');
      // Role chunk, stamped chunks (each stamped just before it is written), finish and [DONE].
      const head = { id: `chatcmpl-convbench-stamp${++stampedStreams}`, created: Math.floor(Date.now() / 1000), model };
      const role = chunkFrame(head, { role: 'assistant', content: '' }, null);
      const finish = chunkFrame(head, {}, 'stop') + DONE_FRAME;
      const stamped = (i: number) => chunkFrame(head, { content: ` ${i}@${process.hrtime.bigint() / 1000n}` }, null);
      return pump(res, stampTokens, (i) => (i === 0 ? role : '') + stamped(i) + (i === stampTokens - 1 ? finish : ''), stampGapMs);
    }
    const tokens = echo ? ['Re:', said, ...echoWords].map((w, i) => (i === 0 ? w : ` ${w}`)) : fixedTokens;
    if (!echo) lastFixedBody = raw;
    if (!stream) return sendJson(res, 200, completionBody(model, tokens));
    const frames = (!echo && framesByModel.get(model)) || replyFrames(model, tokens, echo);
    if (!echo && framesByModel.size < 16) framesByModel.set(model, frames);
    pump(res, frames.length, (i) => frames[i]!, replyGapMs);
  };
  listen((req, res) => {
    const route = `${req.method} ${(req.url ?? '/').split('?')[0]}`;
    if (route === 'POST /v1/chat/completions') {
      const parts: Buffer[] = [];
      req.on('data', (part: Buffer) => parts.push(part));
      return void req.on('end', () => chat(Buffer.concat(parts).toString('utf8'), res));
    }
    if (route === 'GET /v1/models') return sendJson(res, 200, models);
    if (route === `GET ${LAST_BODY_PATH}`) {
      const body = lastFixedBody;
      lastFixedBody = null;
      return body === null ? sendError(res, 404, 'no fixed-reply request since the last call') : sendJson(res, 200, body);
    }
    req.resume();
    sendError(res, 404, `Invalid URL (${route})`);
  });
}
if (import.meta.main) {
  const kind = process.argv[2];
  if (kind === 'upstream') upstream();
  else if (kind === 'pipe') pipe();
  else if (kind === 'bare') await bare(process.argv[3] ?? 'node');
  else throw new Error(`upstream.ts: unknown server '${kind}' (upstream | pipe | bare node|uws)`);
}
