import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { Logger } from 'pino';
import type { InferenceConfig } from '../config.ts';
import { TroupeError } from '../errors.ts';
import { callScope } from './call-scope.ts';
import type { CharacterModel } from './character-model.ts';
import { OpenAiHttp, UpstreamConnectionError, UpstreamStatusError } from './openai-http.ts';
import { type BatchWritten, sseJson, UpstreamStreamError } from './sse-reader.ts';

export interface UpstreamModel {
  id: string;
  created: number;
  owned_by: string;
}

/** What follows a stream's first chunk: one at a time (`next`), or pushed as it arrives (`pump`, see SseReader). */
export interface ChunkReader extends AsyncIterator<ChatCompletionChunk> {
  pump(deliver: (chunk: ChatCompletionChunk) => void, flush: () => BatchWritten): Promise<boolean>;
}

/** A started stream: the first chunk already arrived, so the call can no longer fail "before the first byte". */
export interface UpstreamStream {
  first: ChatCompletionChunk;
  /** What follows `first` (read it one way only). */
  rest: ChunkReader;
  /** Ends the upstream request early (client gone, failure). */
  cancel(): void;
  /** Frees the call's timers once the stream ended normally. */
  release(): void;
}

/**
 * The inference backend: any OpenAI-compatible server. Chat completions go through our own
 * keep-alive HTTP client and SSE parser (openai-http.ts), the model list through the openai SDK.
 * Only failures before response headers are retried, i.e. before anything reached our client.
 * A timeout until headers (connect), one until the first streamed token and one for the whole
 * call bound every request.
 */
export class InferenceUpstream implements CharacterModel {
  readonly #config: InferenceConfig;
  readonly #client: OpenAI | null;
  readonly #http: OpenAiHttp | null;
  readonly #logger: Logger;
  #models: { at: number; list: Promise<UpstreamModel[]> } | null = null;

  constructor(config: InferenceConfig, logger: Logger) {
    this.#config = config;
    this.#logger = logger;
    this.#client = config.baseUrl
      ? new OpenAI({
          baseURL: config.baseUrl,
          apiKey: config.apiKey ?? 'unused',
          timeout: config.connectTimeoutMs,
          maxRetries: config.maxRetries,
        })
      : null;
    this.#http = config.baseUrl
      ? new OpenAiHttp({ baseUrl: config.baseUrl, apiKey: config.apiKey, connectTimeoutMs: config.connectTimeoutMs, maxRetries: config.maxRetries })
      : null;
  }

  /** Closes idle keep-alive connections to the inference server. */
  close(): void {
    this.#http?.close();
  }

  get configured(): boolean {
    return this.#client !== null;
  }

  /** The model characters answer with. */
  characterModel(): string {
    this.#require();
    if (!this.#config.model) {
      throw new TroupeError('upstream_unavailable', 'No model for characters is configured: set INFERENCE_MODEL to a model the inference server serves.', {
        detailCode: 'inference_model_not_configured',
      });
    }
    return this.#config.model;
  }

  /** The upstream's models, cached for INFERENCE_MODELS_TTL_MS; [] when no upstream is configured. */
  async listModels(): Promise<UpstreamModel[]> {
    const client = this.#client;
    if (!client) return [];
    const now = Date.now();
    if (!this.#models || now - this.#models.at > this.#config.modelsTtlMs) {
      const list = (async () => {
        const models: UpstreamModel[] = [];
        for await (const m of client.models.list()) {
          models.push({ id: m.id, created: m.created ?? 0, owned_by: m.owned_by ?? 'upstream' });
        }
        return models;
      })();
      this.#models = { at: now, list };
      // A failed fetch must not stay cached.
      list.catch(() => {
        if (this.#models?.list === list) this.#models = null;
      });
    }
    try {
      return await this.#models.list;
    } catch (err) {
      throw this.#mapError(err);
    }
  }

  async complete(params: ChatCompletionCreateParamsNonStreaming, signal: AbortSignal): Promise<ChatCompletion> {
    const http = this.#requireHttp();
    const scope = callScope(signal, this.#config.totalTimeoutMs);
    try {
      return await http.postJson<ChatCompletion>('chat/completions', params, scope.signal);
    } catch (err) {
      throw this.#mapError(err, signal);
    } finally {
      scope.release();
    }
  }

  /** Resolves once the first chunk arrived; failures until then reject (nothing was sent yet). */
  async stream(params: ChatCompletionCreateParamsStreaming, signal: AbortSignal): Promise<UpstreamStream> {
    const http = this.#requireHttp();
    const scope = callScope(signal, this.#config.totalTimeoutMs);
    const firstTokenTimer = setTimeout(() => scope.abort(new FirstTokenTimeout()), this.#config.firstTokenTimeoutMs);
    try {
      const res = await http.post('chat/completions', params, scope.signal, 'text/event-stream');
      // The reader parses JSON objects; the server is trusted to send chat.completion.chunk ones.
      const reader = sseJson(res) as unknown as ChunkReader;
      const first = await reader.next();
      if (first.done) throw new TroupeError('upstream_error', 'The inference server ended the stream without sending anything.');
      return {
        first: first.value,
        rest: reader,
        cancel: () => {
          scope.abort();
          scope.release();
        },
        release: scope.release,
      };
    } catch (err) {
      scope.abort();
      scope.release();
      if (scope.signal.reason instanceof FirstTokenTimeout) {
        throw new TroupeError('upstream_unavailable', `The inference server sent no token within ${this.#config.firstTokenTimeoutMs} ms (INFERENCE_FIRST_TOKEN_TIMEOUT_MS).`, {
          detailCode: 'upstream_timeout',
        });
      }
      throw this.#mapError(err, signal);
    } finally {
      clearTimeout(firstTokenTimer);
    }
  }

  /** One model call of a character's reply, with the configured character model. */
  async *streamReply(messages: ChatCompletionMessageParam[], tools: ChatCompletionTool[], signal: AbortSignal): AsyncGenerator<ChatCompletionChunk> {
    const stream = await this.stream({ model: this.characterModel(), messages, stream: true, ...(tools.length > 0 ? { tools } : {}) }, signal);
    yield* this.chunks(stream, signal);
  }

  /**
   * Every chunk of a started stream, the first included; failures become our errors and the
   * upstream request is ended however iteration stops.
   */
  async *chunks(stream: UpstreamStream, signal: AbortSignal): AsyncGenerator<ChatCompletionChunk> {
    let complete = false;
    try {
      yield stream.first;
      for (let next = await stream.rest.next(); !next.done; next = await stream.rest.next()) yield next.value;
      complete = true;
    } catch (err) {
      throw this.#mapError(err, signal);
    } finally {
      // A finished stream needs no abort (each one cost a DOMException on the hot path).
      if (complete) stream.release();
      else stream.cancel();
    }
  }

  /** Maps SDK failures to our errors: the caller's mistakes stay 4xx, everything else is a 502. */
  mapError(err: unknown, signal?: AbortSignal): TroupeError {
    return this.#mapError(err, signal);
  }

  #mapError(err: unknown, signal?: AbortSignal): TroupeError {
    if (err instanceof TroupeError) return err;
    if (signal?.aborted) return new TroupeError('upstream_error', 'The request was cancelled by the client.', { cause: err, detailCode: 'client_closed' });
    const mapped = this.#mapHttpError(err);
    if (mapped) return mapped;
    if (err instanceof OpenAI.APIConnectionTimeoutError || err instanceof OpenAI.APIUserAbortError) {
      return new TroupeError('upstream_unavailable', `The inference server at ${this.#config.baseUrl} did not answer in time (INFERENCE_CONNECT_TIMEOUT_MS / INFERENCE_TOTAL_TIMEOUT_MS).`, {
        cause: err,
        detailCode: 'upstream_timeout',
      });
    }
    if (err instanceof OpenAI.APIConnectionError) {
      return new TroupeError('upstream_unavailable', `The inference server at ${this.#config.baseUrl} is unreachable; check INFERENCE_BASE_URL.`, {
        cause: err,
        detailCode: 'upstream_unavailable',
      });
    }
    if (err instanceof OpenAI.APIError && err.status !== undefined) {
      const message = err.error && typeof err.error === 'object' && 'message' in err.error ? String(err.error.message) : err.message;
      return this.#statusError(err.status, message, err, (name) => err.headers?.get(name) ?? undefined);
    }
    this.#logger.error({ err }, 'inference call failed');
    return new TroupeError('upstream_error', 'The inference call failed.', { cause: err });
  }

  /** The failures of our own HTTP client (openai-http.ts), mapped as the SDK's are below. */
  #mapHttpError(err: unknown): TroupeError | null {
    // Our signal ended the call: the total timeout (the caller's own abort is handled before).
    const timedOut = (err instanceof UpstreamConnectionError && err.timedOut) || (err instanceof Error && err.name === 'AbortError');
    if (timedOut) {
      return new TroupeError('upstream_unavailable', `The inference server at ${this.#config.baseUrl} did not answer in time (INFERENCE_CONNECT_TIMEOUT_MS / INFERENCE_TOTAL_TIMEOUT_MS).`, {
        cause: err,
        detailCode: 'upstream_timeout',
      });
    }
    if (err instanceof UpstreamConnectionError) {
      return new TroupeError('upstream_unavailable', `The inference server at ${this.#config.baseUrl} is unreachable; check INFERENCE_BASE_URL.`, {
        cause: err,
        detailCode: 'upstream_unavailable',
      });
    }
    if (err instanceof UpstreamStatusError) return this.#statusError(err.status, err.message, err, (name) => headerValue(err.headers[name]));
    if (err instanceof UpstreamStreamError) {
      this.#logger.warn({ upstreamMessage: err.message }, 'inference server reported an error mid-stream');
      return new TroupeError('upstream_error', `The inference server reported an error: ${err.message}`, { cause: err });
    }
    return null;
  }

  #statusError(status: number, message: string, cause: unknown, header: (name: string) => string | undefined): TroupeError {
    // A bad request is the caller's to fix; the upstream's auth and server problems are ours.
    if (status === 400 || status === 422) {
      return new TroupeError('invalid_request', `The inference server rejected the request: ${message}`, { cause, detailCode: 'upstream_rejected' });
    }
    if (status === 429) {
      const after = header('retry-after');
      return new TroupeError('rate_limited', `The inference server is rate limiting: ${message}`, { cause, headers: after ? { 'retry-after': after } : {} });
    }
    this.#logger.warn({ status, upstreamMessage: message }, 'inference server answered with an error');
    return new TroupeError('upstream_error', `The inference server answered ${status}: ${message}`, { cause });
  }

  #requireHttp(): OpenAiHttp {
    this.#require();
    return this.#http as OpenAiHttp;
  }

  #require(): OpenAI {
    if (!this.#client) {
      throw new TroupeError('upstream_unavailable', 'No inference backend is configured: set INFERENCE_BASE_URL (and INFERENCE_MODEL for characters).', {
        detailCode: 'inference_not_configured',
      });
    }
    return this.#client;
  }
}

class FirstTokenTimeout extends Error {}


function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
