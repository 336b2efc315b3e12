import { randomBytes } from 'node:crypto';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';

/** Usage as the wire carries it. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface OutChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint?: string;
  choices: {
    index: number;
    delta: Record<string, unknown>;
    logprobs: unknown;
    finish_reason: string | null;
  }[];
  usage?: Usage | null;
}

/** Random bytes drawn in bulk: one randomBytes call per id cost more than the rest of the id. */
const ID_BYTES = 12;
let idPool = Buffer.alloc(0);
let idOffset = 0;

function newCompletionId(): string {
  if (idOffset + ID_BYTES > idPool.length) {
    idPool = randomBytes(ID_BYTES * 256);
    idOffset = 0;
  }
  const id = `chatcmpl-${idPool.toString('base64url', idOffset, idOffset + ID_BYTES)}`;
  idOffset += ID_BYTES;
  return id;
}

/**
 * Turns upstream chunks into the exact stream the interface describes, whatever the upstream's
 * habits: per choice, a first chunk with `role: assistant` and empty content, then content and
 * tool-call deltas, then an empty delta carrying `finish_reason`; usage (when asked for) last.
 * Each chunk goes to `emit` as its JSON text, written around the one part that changes (the
 * choice), so a content delta costs one small JSON.stringify and no intermediate objects.
 */
export class ChunkNormalizer {
  readonly #id = newCompletionId();
  readonly #created = Math.floor(Date.now() / 1000);
  readonly #model: string;
  readonly #includeUsage: boolean;
  readonly #started = new Set<number>();
  #fingerprint: string | undefined;
  #usage: Usage | null = null;
  /** Everything of a chunk before `"choices"`: the same for the whole stream (until a fingerprint appears). */
  #head: string | null = null;

  constructor(options: { model: string; includeUsage: boolean }) {
    this.#model = options.model;
    this.#includeUsage = options.includeUsage;
  }

  accept(chunk: ChatCompletionChunk, emit: (json: string) => void): void {
    if (this.#fingerprint === undefined && chunk.system_fingerprint) {
      this.#fingerprint = chunk.system_fingerprint;
      this.#head = null;
    }
    if (chunk.usage) this.#usage = toUsage(chunk.usage);
    const choices = chunk.choices;
    if (!choices) return;
    for (const choice of choices) {
      const index = choice.index ?? 0;
      if (!this.#started.has(index)) {
        this.#started.add(index);
        emit(this.#choice(index, '{"role":"assistant","content":""}', 'null', 'null'));
      }
      const delta = deltaJson(choice.delta as Record<string, unknown> | undefined);
      if (delta !== null) emit(this.#choice(index, delta, choice.logprobs == null ? 'null' : JSON.stringify(choice.logprobs), 'null'));
      if (choice.finish_reason) emit(this.#choice(index, '{}', 'null', JSON.stringify(choice.finish_reason)));
    }
  }

  /** The usage chunk (empty `choices`) when `stream_options.include_usage` was set. */
  finish(emit: (json: string) => void): void {
    if (!this.#includeUsage) return;
    const usage = this.#usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    emit(`${this.#prefix()},"usage":${JSON.stringify(usage)},"choices":[]}`);
  }

  #choice(index: number, delta: string, logprobs: string, finishReason: string): string {
    // OpenAI sends usage: null on every chunk but the last when usage was asked for.
    const usage = this.#includeUsage ? ',"usage":null' : '';
    return `${this.#prefix()}${usage},"choices":[{"index":${index},"delta":${delta},"logprobs":${logprobs},"finish_reason":${finishReason}}]}`;
  }

  #prefix(): string {
    this.#head ??=
      `{"id":${JSON.stringify(this.#id)},"object":"chat.completion.chunk","created":${this.#created},"model":${JSON.stringify(this.#model)}` +
      (this.#fingerprint ? `,"system_fingerprint":${JSON.stringify(this.#fingerprint)}` : '');
    return this.#head;
  }
}

/**
 * A delta as JSON without `role` and without null or undefined fields; null when nothing in it
 * carries anything (empty strings and arrays do not).
 */
function deltaJson(delta: Record<string, unknown> | undefined): string | null {
  if (!delta) return null;
  let payload = false;
  let plain = true;
  for (const key in delta) {
    const value = delta[key];
    if (key === 'role') {
      plain = false;
      continue;
    }
    if (value === undefined || value === null) {
      plain = false;
      continue;
    }
    if (key !== 'content') plain = false;
    if (value !== '' && !(Array.isArray(value) && value.length === 0)) payload = true;
  }
  if (!payload) return null;
  // The common chunk: only text.
  if (plain) return `{"content":${JSON.stringify(delta.content)}}`;
  const kept: Record<string, unknown> = {};
  for (const key in delta) {
    const value = delta[key];
    if (key !== 'role' && value !== undefined && value !== null) kept[key] = value;
  }
  return JSON.stringify(kept);
}

/** The non-streaming completion in the exact shape of the interface, reporting `model`. */
export function normalizeCompletion(completion: ChatCompletion, model: string): Record<string, unknown> {
  return {
    id: newCompletionId(),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    ...(completion.system_fingerprint ? { system_fingerprint: completion.system_fingerprint } : {}),
    choices: completion.choices.map((choice, i) => {
      const message = choice.message;
      return {
        index: choice.index ?? i,
        message: {
          role: 'assistant',
          content: message.content ?? null,
          refusal: message.refusal ?? null,
          ...(message.tool_calls && message.tool_calls.length > 0 ? { tool_calls: message.tool_calls } : {}),
          ...(message.annotations ? { annotations: message.annotations } : {}),
        },
        logprobs: choice.logprobs ?? null,
        finish_reason: choice.finish_reason ?? (message.tool_calls?.length ? 'tool_calls' : 'stop'),
      };
    }),
    usage: completion.usage ? toUsage(completion.usage) : { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

function toUsage(u: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number }): Usage {
  const prompt = u.prompt_tokens ?? 0;
  const completion = u.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: u.total_tokens ?? prompt + completion };
}
