// The chat-completion calls to the inference server, on node:http with a keep-alive agent. The
// openai SDK's fetch, web streams and SSE decoder cost several times the bare proxy's CPU per
// streamed reply and put an object or promise on every byte range; this reads the reply's
// bytes directly and parses SSE lines as they arrive (sse-reader.ts). The SDK stays where it serves (models).
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
