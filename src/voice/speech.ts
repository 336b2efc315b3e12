import OpenAI, { toFile } from 'openai';
import type { Logger } from 'pino';
import type { SpeechConfig } from '../config.ts';
import { TroupeError } from '../errors.ts';
import { encodeWav, pcm16Bytes } from './wav.ts';
import { callScope, TotalTimeout } from '../inference/call-scope.ts';

/** Sample rate of what `synthesize` yields: the OpenAI `pcm` response format is 16-bit mono at 24 kHz. */
export const TTS_SAMPLE_RATE = 24_000;

export interface SynthesisOptions {
  /** A character's `voiceId`; null or absent means TTS_VOICE. */
  voice?: string | null;
  /** A character's `voiceDescription`, sent as `instructions` (models that take them). */
  instructions?: string | null;
}

export interface SpeechClientOptions {
  config: SpeechConfig;
  logger: Logger;
}

type Side = 'stt' | 'tts';

/** What each side is called in messages, and the variables that set it. */
const SIDES = {
  stt: { label: 'speech-to-text server', env: 'STT', path: '/audio/transcriptions' },
  tts: { label: 'text-to-speech server', env: 'TTS', path: '/audio/speech' },
} as const satisfies Record<Side, { label: string; env: string; path: string }>;

/**
 * Voice agents' ears and mouth: any OpenAI-compatible audio endpoints, through the openai SDK.
 * As for inference, the SDK's timeout and retries cover the time until response headers
 * (INFERENCE_CONNECT_TIMEOUT_MS, INFERENCE_MAX_RETRIES) and a total timeout bounds the call.
 */
export class SpeechClient {
  readonly #config: SpeechConfig;
  readonly #logger: Logger;
  readonly #clients: Record<Side, OpenAI | null>;

  constructor({ config, logger }: SpeechClientOptions) {
    this.#config = config;
    this.#logger = logger;
    const client = (side: Side) => {
      const { baseUrl, apiKey } = config[side];
      return baseUrl
        ? new OpenAI({ baseURL: baseUrl, apiKey: apiKey ?? 'unused', timeout: config.connectTimeoutMs, maxRetries: config.maxRetries })
        : null;
    };
    this.#clients = { stt: client('stt'), tts: client('tts') };
  }

  /** Settings voice agents lack, one sentence each; empty when speech can work. Checked at start, not at the first utterance. */
  problems(): string[] {
    const out: string[] = [];
    for (const side of ['stt', 'tts'] as const) {
      const { label, env, path } = SIDES[side];
      if (!this.#config[side].baseUrl) out.push(`${env}_BASE_URL is not set (nor INFERENCE_BASE_URL): voice agents need a ${label} serving ${path}.`);
      if (!this.#config[side].model) out.push(`${env}_MODEL is not set: voice agents need a ${label} model.`);
    }
    return out;
  }

  /** Transcribes 16-bit mono PCM (sent as a WAV file); '' for no audio. */
  async transcribe(pcm: Int16Array | Buffer, sampleRate: number, signal: AbortSignal): Promise<string> {
    if (!Number.isInteger(sampleRate) || sampleRate < 1) throw new TroupeError('invalid_request', `The sample rate ${sampleRate} is not a positive whole number of Hz.`);
    const { client, model } = this.#require('stt');
    if (pcm16Bytes(pcm).length === 0) return '';
    const file = await toFile(encodeWav(pcm, sampleRate), 'speech.wav', { type: 'audio/wav' });
    const scope = callScope(signal, this.#config.totalTimeoutMs);
    try {
      const result = await client.audio.transcriptions.create({ file, model }, { signal: scope.signal });
      return result.text.trim();
    } catch (err) {
      throw this.#mapError(err, 'stt', signal, scope.signal);
    } finally {
      scope.release();
    }
  }

  /**
   * Speaks `text` as 16-bit mono PCM at TTS_SAMPLE_RATE, yielded as the server sends it so the
   * first words can play before the line is synthesized. Every chunk holds whole samples (an odd
   * byte waits for the next chunk). Stopping the iteration ends the request.
   */
  async *synthesize(text: string, options: SynthesisOptions, signal: AbortSignal): AsyncGenerator<Buffer> {
    const { client, model } = this.#require('tts');
    const input = text.trim();
    if (input === '') return;
    const scope = callScope(signal, this.#config.totalTimeoutMs);
    let complete = false;
    try {
      const response = await client.audio.speech.create(
        {
          model,
          voice: options.voice || this.#config.tts.voice,
          input,
          response_format: 'pcm',
          ...(options.instructions ? { instructions: options.instructions } : {}),
        },
        { signal: scope.signal },
      );
      if (!response.body) throw new TroupeError('upstream_error', 'The text-to-speech server answered without audio.');
      let carry: Buffer | null = null;
      for await (const part of response.body) {
        let bytes = Buffer.from(part.buffer, part.byteOffset, part.byteLength);
        if (carry) bytes = Buffer.concat([carry, bytes]);
        carry = bytes.length % 2 === 1 ? bytes.subarray(bytes.length - 1) : null;
        if (carry) bytes = bytes.subarray(0, bytes.length - 1);
        if (bytes.length > 0) yield bytes;
      }
      complete = true;
    } catch (err) {
      throw this.#mapError(err, 'tts', signal, scope.signal);
    } finally {
      // Also runs when the consumer stops early: the request ends with it.
      if (!complete) scope.abort();
      scope.release();
    }
  }

  #require(side: Side): { client: OpenAI; model: string } {
    const client = this.#clients[side];
    const model = this.#config[side].model;
    if (!client || !model) {
      const { label, env } = SIDES[side];
      throw new TroupeError('upstream_unavailable', `No ${label} is configured: set ${env}_MODEL and ${env}_BASE_URL (or INFERENCE_BASE_URL).`, {
        detailCode: `${side}_not_configured`,
      });
    }
    return { client, model };
  }

  /** SDK failures as our errors: the request's faults stay 4xx, the server's are 502s. */
  #mapError(err: unknown, side: Side, signal: AbortSignal, call: AbortSignal): TroupeError {
    if (err instanceof TroupeError) return err;
    const { label, env, path } = SIDES[side];
    const where = `The ${label} at ${this.#config[side].baseUrl}`;
    if (signal.aborted) return new TroupeError('upstream_error', 'The request was cancelled by the client.', { cause: err, detailCode: 'client_closed' });
    if (call.reason instanceof TotalTimeout || err instanceof OpenAI.APIConnectionTimeoutError) {
      return new TroupeError('upstream_unavailable', `${where} did not answer in time (INFERENCE_CONNECT_TIMEOUT_MS / INFERENCE_TOTAL_TIMEOUT_MS).`, {
        cause: err,
        detailCode: 'upstream_timeout',
      });
    }
    if (err instanceof OpenAI.APIConnectionError) {
      return new TroupeError('upstream_unavailable', `${where} is unreachable; check ${env}_BASE_URL (or INFERENCE_BASE_URL).`, { cause: err, detailCode: 'upstream_unavailable' });
    }
    if (err instanceof OpenAI.APIError && err.status !== undefined) {
      const message = err.error && typeof err.error === 'object' && 'message' in err.error ? String(err.error.message) : err.message;
      if (err.status === 400 || err.status === 422) {
        // Usually a voice or an input the server refuses: a character or a line to fix.
        return new TroupeError('invalid_request', `${where} rejected the request: ${message}`, { cause: err, detailCode: 'upstream_rejected' });
      }
      if (err.status === 404) {
        return new TroupeError('upstream_error', `${where} answered 404 (does it serve ${path}, and the model in ${env}_MODEL?): ${message}`, { cause: err });
      }
      if (err.status === 429) {
        const retryAfter = err.headers?.get('retry-after');
        return new TroupeError('rate_limited', `${where} is rate limiting: ${message}`, { cause: err, headers: retryAfter ? { 'retry-after': retryAfter } : {} });
      }
      this.#logger.warn({ side, status: err.status, upstreamMessage: message }, 'speech server answered with an error');
      return new TroupeError('upstream_error', `${where} answered ${err.status}: ${message}`, { cause: err });
    }
    // After the headers, a broken connection surfaces from the body stream as a plain error.
    this.#logger.warn({ side, err }, 'speech call failed');
    return new TroupeError('upstream_error', `${where} broke off the call.`, { cause: err });
  }
}
