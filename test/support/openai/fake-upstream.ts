// A real HTTP server speaking the OpenAI wire format, scripted by tests: Troupe's /v1 proxies to
// "any OpenAI-compatible server", so its tests need one whose every byte they control.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { eventQueue, readBody, sendError, sendJson, waitForClose, write } from './http.ts';
import {
  chatCompletion,
  choiceDeltas,
  choiceTokens,
  chunk,
  contentText,
  embedding,
  embeddingBase64,
  errorBody,
  estimateTokens,
  interleave,
  isRecord,
  model,
  promptTokens,
  splitText,
  usage,
  type ChoicePlan,
  type ErrorSpec,
  type FinishReason,
  type ToolCallScript,
} from './wire.ts';

/** The next /v1/chat/completions reply. Fields left out fall back to the default reply. */
export interface ChatScript {
  /** The reply text; an array gives choice i the i-th text (the last one repeats). */
  text?: string | string[];
  toolCalls?: ToolCallScript[];
  /** Overrides the finish reason the reply would otherwise get (stop, length or tool_calls). */
  finishReason?: FinishReason;
  /** Answer with this HTTP error before any byte of a reply. */
  error?: ErrorSpec;
  /**
   * Stream only: destroy the socket after this many chunks, with no [DONE]. The client may lose
   * chunks that arrive with the error (fetch discards a body stream's unread queue when it errors);
   * when a test needs the client to have read them first, use stallAfterChunks and then breakOff().
   */
  failAfterChunks?: number;
  /** Stream only: send this many chunks, then hold the response open until the client leaves. */
  stallAfterChunks?: number;
  /** Stream only: wait this long before each chunk after the first. */
  chunkDelayMs?: number;
  /** The model the reply names; defaults to the requested one. */
  model?: string;
}

export interface FakeUpstreamOptions {
  /** Ids listed by GET /v1/models. */
  models?: string[];
  /** When set, any request whose Authorization is not `Bearer <key>` gets a 401. */
  requireApiKey?: string;
  /** Embedding size when the request names no `dimensions`. */
  embeddingDimensions?: number;
  /** The reply when no script is queued; by default the last user message is echoed. */
  defaultReply?: (body: Record<string, unknown>) => ChatScript;
}

/**
 * How a request ended: `aborted` means the client went away before the reply was complete;
 * `broken` means a script destroyed the socket on purpose; `shutdown` means close() cut it.
 */
export type RequestOutcome = 'pending' | 'completed' | 'aborted' | 'broken' | 'shutdown';

export interface RecordedRequest {
  /** 1-based arrival order. */
  seq: number;
  method: string;
  /** The path without its query string, e.g. `/v1/chat/completions`. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body; undefined when the body was empty, not JSON, or not read yet. */
  body: unknown;
  rawBody: string;
  /** When its first byte arrived and when the reply's last chunk was written (ms on performance.timeOrigin's clock). */
  receivedAt: number;
  lastChunkAt: number | null;
  /** True once the client has gone away before the reply finished. */
  aborted: boolean;
  outcome: RequestOutcome;
  /** Resolves when the exchange ends, whichever way. */
  settled: Promise<RequestOutcome>;
  /** Resolves the first time a streamed reply had to wait for the client to read (its socket was full). */
  backpressured: Promise<void>;
  /** Destroys the connection now, as an upstream crash would (outcome `broken`); no-op once ended. */
  breakOff(): void;
}

export interface FakeUpstream {
  /** Base URL including `/v1`, as OpenAI clients expect. */
  url: string;
  requests: RecordedRequest[];
  /** How many requests the client aborted so far. */
  readonly aborts: number;
  /** Scripts queued and not yet consumed. */
  readonly pendingScripts: number;
  /** Queues replies for the next chat completion requests, first in first out. */
  script(...replies: ChatScript[]): void;
  /** Drops queued replies (a failed test's leftovers must not answer the next test). */
  clearScripts(): void;
  /**
   * The oldest request not yet handed out by this method, waiting for one if there is none. A
   * request is handed out once its body is read; `requests` lists it from its first byte.
   */
  nextRequest(): Promise<RecordedRequest>;
  /** Like nextRequest, over requests the client aborted. */
  nextAbort(): Promise<RecordedRequest>;
  /**
   * Holds embeddings requests unanswered (a document stays in `processing`) and resolves with
   * the first one that arrives; `release()` answers it and every later one.
   */
  holdEmbeddings(): { arrived: Promise<void>; release(): void };
  close(): Promise<void>;
}

export const DEFAULT_MODELS = ['fake-chat-1', 'fake-embed-1'];

export function defaultEcho(body: Record<string, unknown>): ChatScript {
  const messages = Array.isArray(body.messages) ? (body.messages as unknown[]) : [];
  const lastUser = messages.findLast((message) => isRecord(message) && message.role === 'user');
  const text = isRecord(lastUser) ? contentText(lastUser.content) : '';
  return { text: text || 'Hello from the fake upstream.' };
}

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const models = options.models ?? DEFAULT_MODELS;
  const defaultReply = options.defaultReply ?? defaultEcho;
  const scripts: ChatScript[] = [];
  const requests: RecordedRequest[] = [];
  const arrivals = eventQueue<RecordedRequest>();
  const abortEvents = eventQueue<RecordedRequest>();
  let aborts = 0;
  let closing = false;
  let closed: Promise<void> | undefined;
  let completions = 0;

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // A bug in the fake must be loud, not look like an upstream failure the test expected.
      console.error('fake upstream failed:', error);
      if (!res.headersSent) sendJson(res, 500, errorBody({ status: 500, type: 'fake_upstream_bug', message: String(error) }));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Recorded before the body is read, so a client that gives up mid-upload still counts as an abort.
    const rec = record(req, res);
    try {
      rec.rawBody = await readBody(req);
    } catch {
      return; // the client left; the close handler has recorded it
    }
    try {
      rec.body = rec.rawBody ? JSON.parse(rec.rawBody) : undefined;
    } catch {
      rec.body = undefined;
    }
    const body = rec.body;
    arrivals.push(rec);

    if (options.requireApiKey !== undefined && req.headers.authorization !== `Bearer ${options.requireApiKey}`) {
      const message = 'Incorrect API key provided.';
      return sendError(res, { status: 401, type: 'invalid_request_error', message, code: 'invalid_api_key' });
    }
    const method = req.method ?? 'GET';
    if (method === 'POST' && rec.path === '/v1/chat/completions') return chatCompletions(res, rec, body);
    if (method === 'POST' && rec.path === '/v1/embeddings') {
      if (embeddingsHold) {
        embeddingsHold.arrive();
        await embeddingsHold.released;
      }
      return embeddings(res, body);
    }
    if (method === 'GET' && rec.path === '/v1/models') {
      return sendJson(res, 200, { object: 'list', data: models.map((id) => model(id, 1_700_000_000)) });
    }
    if (method === 'GET' && rec.path.startsWith('/v1/models/')) {
      const id = decodeURIComponent(rec.path.slice('/v1/models/'.length));
      if (models.includes(id)) return sendJson(res, 200, model(id, 1_700_000_000));
      const message = `The model '${id}' does not exist`;
      return sendError(res, { status: 404, type: 'invalid_request_error', message, param: 'model', code: 'model_not_found' });
    }
    sendError(res, { status: 404, type: 'invalid_request_error', message: `Invalid URL (${method} ${rec.path})` });
  }

  const held = new WeakMap<RecordedRequest, () => void>();

  function record(req: IncomingMessage, res: ServerResponse): RecordedRequest {
    let settle: (outcome: RequestOutcome) => void = () => {};
    const backpressured = Promise.withResolvers<void>();
    const rec: RecordedRequest = {
      seq: requests.length + 1,
      method: req.method ?? 'GET',
      path: (req.url ?? '/').split('?')[0] ?? '/',
      headers: req.headers,
      body: undefined,
      rawBody: '',
      receivedAt: performance.timeOrigin + performance.now(),
      lastChunkAt: null,
      aborted: false,
      outcome: 'pending',
      settled: new Promise((resolve) => (settle = resolve)),
      backpressured: backpressured.promise,
      breakOff() {
        if (rec.outcome !== 'pending') return;
        rec.outcome = 'broken';
        res.destroy();
      },
    };
    held.set(rec, backpressured.resolve);
    requests.push(rec);
    res.on('close', () => {
      if (rec.outcome === 'pending') {
        if (res.writableFinished) rec.outcome = 'completed';
        else if (closing) rec.outcome = 'shutdown';
        else {
          rec.outcome = 'aborted';
          rec.aborted = true;
          aborts++;
          abortEvents.push(rec);
        }
      }
      settle(rec.outcome);
    });
    return rec;
  }

  async function chatCompletions(res: ServerResponse, rec: RecordedRequest, body: unknown): Promise<void> {
    if (!isRecord(body)) return sendError(res, invalid('We could not parse the JSON body of your request.', null));
    if (typeof body.model !== 'string') return sendError(res, invalid("Missing required parameter: 'model'.", 'model'));
    if (!Array.isArray(body.messages)) return sendError(res, invalid("Missing required parameter: 'messages'.", 'messages'));
    const n = body.n ?? 1;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 128) return sendError(res, invalid('n must be an integer from 1 to 128.', 'n'));

    const scripted = scripts.shift();
    const script: ChatScript = scripted?.text === undefined && scripted?.toolCalls === undefined
      ? { ...defaultReply(body), ...scripted }
      : scripted;
    if (script.error) return sendError(res, script.error);

    completions++;
    const plans = Array.from({ length: n }, (_, index) => planChoice(script, body, index, completions));
    const head = { id: `chatcmpl-fake${String(completions).padStart(8, '0')}`, created: nowSeconds(), model: script.model ?? body.model };
    const totals = usage(promptTokens(body.messages), plans.reduce((sum, plan) => sum + choiceTokens(plan), 0));
    if (body.stream !== true) return sendJson(res, 200, chatCompletion(head, plans, totals));

    const streamOptions = isRecord(body.stream_options) ? body.stream_options : {};
    const withUsage = streamOptions.include_usage === true;
    const chunks = interleave(plans.map((plan, index) => choiceDeltas(index, plan))).map((choice) => chunk(head, [choice], withUsage));
    if (withUsage) chunks.push(chunk(head, [], true, totals));
    await streamChunks(res, rec, chunks, script);
  }

  async function streamChunks(res: ServerResponse, rec: RecordedRequest, chunks: unknown[], script: ChatScript): Promise<void> {
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.flushHeaders();
    for (const [sent, data] of chunks.entries()) {
      if (script.failAfterChunks === sent) return rec.breakOff();
      if (script.stallAfterChunks === sent) return void (await waitForClose(res));
      if (sent > 0 && script.chunkDelayMs) {
        try {
          await delay(script.chunkDelayMs, undefined, { signal: gone.signal });
        } catch {
          return; // the client left while we waited
        }
      }
      if (!(await write(res, `data: ${JSON.stringify(data)}\n\n`, held.get(rec)))) return;
    }
    if (script.failAfterChunks !== undefined && script.failAfterChunks >= chunks.length) return rec.breakOff();
    if (script.stallAfterChunks !== undefined && script.stallAfterChunks >= chunks.length) return void (await waitForClose(res));
    rec.lastChunkAt = performance.timeOrigin + performance.now();
    if (!(await write(res, 'data: [DONE]\n\n'))) return;
    res.end();
  }

  let embeddingsHold: { arrive: () => void; released: Promise<void> } | null = null;

  function embeddings(res: ServerResponse, body: unknown): void {
    if (!isRecord(body)) return sendError(res, invalid('We could not parse the JSON body of your request.', null));
    if (typeof body.model !== 'string') return sendError(res, invalid("Missing required parameter: 'model'.", 'model'));
    const inputs = typeof body.input === 'string' ? [body.input] : body.input;
    if (!Array.isArray(inputs) || inputs.length === 0 || !inputs.every((input) => typeof input === 'string')) {
      return sendError(res, invalid("'input' must be a string or a non-empty array of strings.", 'input'));
    }
    const dimensions = body.dimensions ?? options.embeddingDimensions ?? 8;
    if (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 1) {
      return sendError(res, invalid('dimensions must be a positive integer.', 'dimensions'));
    }
    const base64 = body.encoding_format === 'base64';
    const data = (inputs as string[]).map((input, index) => {
      const vector = embedding(input, dimensions);
      return { object: 'embedding', index, embedding: base64 ? embeddingBase64(vector) : vector };
    });
    const tokens = (inputs as string[]).reduce((sum, input) => sum + estimateTokens(input), 0);
    sendJson(res, 200, { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    get aborts() {
      return aborts;
    },
    get pendingScripts() {
      return scripts.length;
    },
    script(...replies) {
      scripts.push(...replies);
    },
    clearScripts() {
      scripts.length = 0;
    },
    nextRequest: () => arrivals.next(),
    nextAbort: () => abortEvents.next(),
    holdEmbeddings() {
      let arrive = () => {};
      let release = () => {};
      const arrived = new Promise<void>((resolve) => (arrive = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      embeddingsHold = { arrive, released };
      return {
        arrived,
        release: () => {
          embeddingsHold = null;
          release();
        },
      };
    },
    close() {
      if (closed) return closed;
      closing = true;
      arrivals.fail(new Error('fake upstream closed'));
      abortEvents.fail(new Error('fake upstream closed'));
      closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}

/** Applies the script, `stop` and the token limit to one choice. */
function planChoice(script: ChatScript, body: Record<string, unknown>, index: number, completion: number): ChoicePlan {
  const texts = typeof script.text === 'string' ? [script.text] : script.text;
  let content = texts ? (texts[Math.min(index, texts.length - 1)] ?? null) : null;
  let cut: FinishReason | null = null;
  if (content !== null) {
    const text = content;
    const stops = typeof body.stop === 'string' ? [body.stop] : Array.isArray(body.stop) ? (body.stop as unknown[]) : [];
    const at = Math.min(...stops.map((stop) => (typeof stop === 'string' && stop ? text.indexOf(stop) : -1)).filter((i) => i >= 0));
    if (Number.isFinite(at)) {
      content = text.slice(0, at);
      cut = 'stop';
    }
    const limit = body.max_completion_tokens ?? body.max_tokens;
    if (typeof limit === 'number' && estimateTokens(content) > limit) {
      content = splitText(content).slice(0, limit).join('').trimEnd();
      cut = 'length';
    }
  }
  const toolCalls = (script.toolCalls ?? []).map((call, k) => ({
    id: call.id ?? `call_fake${completion}_${index}_${k}`,
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
  }));
  const finishReason = script.finishReason ?? cut ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
  return { content, toolCalls, finishReason };
}

function invalid(message: string, param: string | null): ErrorSpec {
  return { status: 400, type: 'invalid_request_error', message, param };
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
