// The chat-completion calls to the inference server, on node:http with a keep-alive agent. The
// openai SDK's fetch, web streams and SSE decoder cost several times the bare proxy's CPU per
// streamed reply and put an object or promise on every byte range; this reads the reply's
// bytes directly and parses SSE lines as they arrive. The SDK stays where it serves (models).
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';

export interface OpenAiHttpOptions {
  /** Base URL including its version path, e.g. `http://host:8000/v1`. */
  baseUrl: string;
  apiKey: string | undefined;
  /** Until response headers, per attempt. */
  connectTimeoutMs: number;
  /** Attempts after the first, for failures before response headers. */
  maxRetries: number;
}

/** The server answered with a status other than 2xx. */
export class UpstreamStatusError extends Error {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  constructor(status: number, message: string, headers: http.IncomingHttpHeaders) {
    super(message);
    this.name = 'UpstreamStatusError';
    this.status = status;
    this.headers = headers;
  }
}

/** No response: the connection failed, or headers did not come within the connect timeout. */
export class UpstreamConnectionError extends Error {
  readonly timedOut: boolean;
  constructor(message: string, timedOut: boolean, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'UpstreamConnectionError';
    this.timedOut = timedOut;
  }
}

/** The stream itself reported an error (an `error` event or object after the 200). */
export class UpstreamStreamError extends Error {
  override name = 'UpstreamStreamError';
}

/** Error bodies are read up to this size for their message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
/** openai-node's backoff: 0.5 s doubling up to 8 s, less up to a quarter of jitter. */
const BACKOFF_INITIAL_MS = 500;
const BACKOFF_MAX_MS = 8_000;
/** A Retry-After longer than this is not waited for: the failure goes to the caller. */
const MAX_RETRY_AFTER_MS = 60_000;

type Target = { protocol: string; hostname: string; port: string; path: string };

export class OpenAiHttp {
  readonly #options: OpenAiHttpOptions;
  readonly #base: URL;
  readonly #agent: http.Agent;
  readonly #request: typeof http.request;
  readonly #headers: Record<string, string>;
  /** Request options per path (the few this client calls). */
  readonly #targets = new Map<string, Target>();

  constructor(options: OpenAiHttpOptions) {
    this.#options = options;
    this.#base = new URL(options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
    const secure = this.#base.protocol === 'https:';
    this.#agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    this.#request = secure ? https.request : http.request;
    this.#headers = {
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: `Bearer ${options.apiKey ?? 'unused'}`,
    };
  }

  /** POSTs JSON and resolves with a 2xx response whose body is unread, retrying as the SDK does. */
  async post(path: string, body: unknown, signal: AbortSignal, accept = 'application/json'): Promise<IncomingMessage> {
    const payload = Buffer.from(JSON.stringify(body));
    // Host, port and path as options: a URL per call costs a parse here and a conversion in node:http.
    const target = this.#target(path);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#once(target, payload, accept, signal);
      } catch (err) {
        const wait = this.#retryDelay(err, attempt, signal);
        if (wait === null) throw err;
        await sleep(wait, signal);
      }
    }
  }

  /** POSTs JSON and parses the JSON reply. */
  async postJson<T>(path: string, body: unknown, signal: AbortSignal): Promise<T> {
    const res = await this.post(path, body, signal);
    return JSON.parse(await readText(res, Infinity)) as T;
  }

  /** Closes idle keep-alive connections (shutdown). */
  close(): void {
    this.#agent.destroy();
  }

  #target(path: string): Target {
    let target = this.#targets.get(path);
    if (target === undefined) {
      const url = new URL(path, this.#base);
      target = { protocol: url.protocol, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port, path: `${url.pathname}${url.search}` };
      this.#targets.set(path, target);
    }
    return target;
  }

  #once(target: Target, payload: Buffer, accept: string, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = this.#request({
        ...target,
        method: 'POST',
        agent: this.#agent,
        signal,
        headers: { ...this.#headers, accept, 'content-length': String(payload.length) },
      });
      const timer = setTimeout(() => req.destroy(new UpstreamConnectionError(`No response within ${this.#options.connectTimeoutMs} ms.`, true)), this.#options.connectTimeoutMs);
      req.once('response', (res) => {
        clearTimeout(timer);
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) return resolve(res);
        readText(res, MAX_ERROR_BODY_BYTES).then(
          (text) => reject(new UpstreamStatusError(status, errorMessage(text, status), res.headers)),
          (err: unknown) => reject(new UpstreamStatusError(status, `status ${status} (${String(err)})`, res.headers)),
        );
      });
      req.once('error', (err) => {
        clearTimeout(timer);
        if (err instanceof UpstreamConnectionError || signal.aborted) reject(err);
        else reject(new UpstreamConnectionError(err.message, false, err));
      });
      req.end(payload);
    });
  }

  /** How long to wait before the next attempt, or null when the failure goes to the caller. */
  #retryDelay(err: unknown, attempt: number, signal: AbortSignal): number | null {
    if (signal.aborted || attempt >= this.#options.maxRetries) return null;
    if (err instanceof UpstreamStatusError) {
      const should = err.headers['x-should-retry'];
      if (should === 'false') return null;
      if (should !== 'true' && !(err.status === 408 || err.status === 409 || err.status === 429 || err.status >= 500)) return null;
      const after = retryAfterMs(err.headers);
      if (after !== null && after <= MAX_RETRY_AFTER_MS) return after;
    } else if (!(err instanceof UpstreamConnectionError)) {
      return null;
    }
    const backoff = Math.min(BACKOFF_INITIAL_MS * 2 ** attempt, BACKOFF_MAX_MS);
    return backoff * (1 - Math.random() * 0.25);
  }
}

/**
 * The JSON payloads of an SSE reply, in order, until `[DONE]` or the end of the body. An `error`
 * event, or a payload that is an error object, throws UpstreamStreamError. Event driven, so a
 * promise is made only when the reader waits; and the body is read to its end even after
 * `[DONE]`, because destroying it early would close the keep-alive connection.
 */
export function sseJson(res: IncomingMessage): SseReader {
  return new SseReader(res);
}

/**
 * A batch handler of `SseReader.pump`: true when written, false when the client left, or a
 * promise of either while the client's socket drains.
 */
export type BatchWritten = boolean | Promise<boolean>;

interface Pump {
  deliver: (payload: Record<string, unknown>) => void;
  flush: () => BatchWritten;
  resolve: (complete: boolean) => void;
  reject: (err: unknown) => void;
  /** A flush is waiting for the client's socket (the response is paused meanwhile). */
  draining: boolean;
}

/**
 * Read one at a time (`next`), or pushed as they arrive (`pump`): the hot path, which parses and
 * hands each payload on within the socket's own read, with no promise per event.
 */
export class SseReader implements AsyncIterableIterator<Record<string, unknown>> {
  readonly #res: IncomingMessage;
  readonly #ready: Record<string, unknown>[] = [];
  #head = 0;
  #failure: unknown = null;
  #ended = false;
  #done = false;
  #wake: (() => void) | null = null;
  #pump: Pump | null = null;
  #pending = '';
  #data: string | null = null;
  #event = '';

  constructor(res: IncomingMessage) {
    this.#res = res;
    res.setEncoding('utf8');
    res.on('data', (piece: string) => this.#accept(piece));
    res.once('end', () => this.#finish(null));
    res.once('error', (err) => this.#finish(err));
    res.once('close', () => this.#finish(res.complete ? null : new UpstreamStreamError('The inference server closed the stream before it ended.')));
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Record<string, unknown>> {
    return this;
  }

  async next(): Promise<IteratorResult<Record<string, unknown>>> {
    for (;;) {
      if (this.#head < this.#ready.length) {
        const value = this.#ready[this.#head++] as Record<string, unknown>;
        if (this.#head === this.#ready.length) {
          this.#ready.length = 0;
          this.#head = 0;
        }
        return { value, done: false };
      }
      if (this.#failure !== null) throw this.#failure;
      if (this.#done || this.#ended) return { value: undefined, done: true };
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  /**
   * Hands every payload not yet read to `deliver` as it is parsed, and calls `flush` after each
   * arrival's payloads (one write per arrival). While a flush waits for the client's socket the
   * response is paused, so a slow client slows the inference server instead of filling memory.
   * Resolves true at `[DONE]` or the end, leaving the last arrival's payloads for the caller to
   * write with its own ending; false once `flush` answered false (the client left). Rejects
   * with the stream's failure after flushing what came before it.
   */
  pump(deliver: (payload: Record<string, unknown>) => void, flush: () => BatchWritten): Promise<boolean> {
    const { promise, resolve, reject } = Promise.withResolvers<boolean>();
    this.#pump = { deliver, flush, resolve, reject, draining: false };
    const waiting = this.#ready.splice(0).slice(this.#head);
    this.#head = 0;
    try {
      for (const payload of waiting) deliver(payload);
    } catch (err) {
      if (this.#failure === null) this.#failure = err;
    }
    this.#pushed();
    return promise;
  }

  /** Stops early (the consumer gave up): the connection cannot be reused then. */
  async return(): Promise<IteratorResult<Record<string, unknown>>> {
    if (!this.#ended) this.#res.destroy();
    this.#ended = true;
    return { value: undefined, done: true };
  }

  #accept(piece: string): void {
    if (this.#done || this.#failure !== null) return; // past [DONE]: read to the end, keep nothing
    const text = this.#pending === '' ? piece : this.#pending + piece;
    let start = 0;
    try {
      for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
        const line = text.charCodeAt(end - 1) === 13 ? text.slice(start, end - 1) : text.slice(start, end);
        start = end + 1;
        this.#line(line);
        if (this.#done) break;
      }
    } catch (err) {
      this.#failure = err;
    }
    this.#pending = start === 0 ? text : text.slice(start);
    this.#signal();
  }

  #line(line: string): void {
    if (line === '') {
      // A blank line ends the event.
      const data = this.#data;
      if (data === null) return;
      this.#data = null;
      if (data === '[DONE]') {
        this.#done = true;
        return;
      }
      const payload = parseEventData(data, this.#event);
      this.#event = '';
      this.#parsed(payload);
    } else if (line.startsWith('data:')) {
      const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
      this.#data = this.#data === null ? value : `${this.#data}\n${value}`;
    } else if (line.startsWith('event:')) {
      this.#event = line.slice(6).trim();
    }
    // Comments (`:`), ids and retry fields carry nothing a completion needs.
  }

  #finish(err: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    if (err !== null && !this.#done && this.#failure === null) this.#failure = err;
    // A last event without its blank line (or its newline) still counts.
    if (this.#failure === null && !this.#done && this.#pending !== '') {
      try {
        this.#line(this.#pending);
      } catch (lineErr) {
        this.#failure = lineErr;
      }
    }
    if (this.#failure === null && !this.#done && this.#data !== null && this.#data !== '[DONE]') {
      try {
        this.#parsed(parseEventData(this.#data, this.#event));
      } catch (parseErr) {
        this.#failure = parseErr;
      }
    }
    this.#signal();
  }

  /** A payload goes to the pump when there is one, else waits for `next`. */
  #parsed(payload: Record<string, unknown>): void {
    if (this.#pump) this.#pump.deliver(payload);
    else this.#ready.push(payload);
  }

  #signal(): void {
    if (this.#pump !== null) return this.#pushed();
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** In pump mode, after an arrival or the end: flush, pause while the client drains, settle at the end. */
  #pushed(): void {
    const pump = this.#pump;
    if (pump === null || pump.draining) return;
    if (this.#failure !== null) {
      this.#pump = null;
      // What arrived before the failure still goes out; the caller then reports the failure.
      void pump.flush();
      pump.reject(this.#failure);
      return;
    }
    if (this.#done || this.#ended) {
      this.#pump = null;
      pump.resolve(true);
      return;
    }
    const sent = pump.flush();
    if (sent === true) return;
    if (sent === false) return this.#stopPump(pump);
    pump.draining = true;
    this.#res.pause();
    sent.then(
      (ok) => {
        pump.draining = false;
        if (!ok) return this.#stopPump(pump);
        this.#res.resume();
        // The end or a failure may have come while paused.
        this.#pushed();
      },
      (err: unknown) => {
        this.#pump = null;
        pump.reject(err);
      },
    );
  }

  /** The client left: keep nothing more (the caller cancels the request). */
  #stopPump(pump: Pump): void {
    this.#pump = null;
    this.#done = true;
    pump.resolve(false);
  }
}

function parseEventData(data: string, event: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new UpstreamStreamError(`The inference server streamed something that is not JSON: ${data.slice(0, 200)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UpstreamStreamError('The inference server streamed a value that is not an object.');
  const record = parsed as Record<string, unknown>;
  if (event === 'error' || record.error !== undefined) {
    const error = record.error as { message?: unknown } | undefined;
    throw new UpstreamStreamError(typeof error?.message === 'string' ? error.message : `The inference server reported an error: ${data.slice(0, 200)}`);
  }
  return record;
}

function errorMessage(text: string, status: number): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof body.error === 'object' && typeof body.error?.message === 'string') return body.error.message;
    if (typeof body.error === 'string') return body.error;
    if (typeof body.message === 'string') return body.message;
  } catch {
    // Not JSON: the text itself is the best message there is.
  }
  return text.trim().slice(0, 500) || `status ${status}`;
}

function retryAfterMs(headers: http.IncomingHttpHeaders): number | null {
  const ms = Number(headers['retry-after-ms']);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers['retry-after'];
  if (raw === undefined) return null;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(raw);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : null;
}

function readText(res: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    res.on('data', (part: Buffer) => {
      size += part.length;
      if (size <= limit) parts.push(part);
    });
    res.once('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    res.once('error', reject);
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
