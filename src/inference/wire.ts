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

function newCompletionId(): string {
  return `chatcmpl-${randomBytes(12).toString('base64url')}`;
}

/**
 * Turns upstream chunks into the exact stream the interface describes, whatever the upstream's
 * habits: per choice, a first chunk with `role: assistant` and empty content, then content and
 * tool-call deltas, then an empty delta carrying `finish_reason`; usage (when asked for) last.
 */
export class ChunkNormalizer {
  readonly #id = newCompletionId();
  readonly #created = Math.floor(Date.now() / 1000);
  readonly #model: string;
  readonly #includeUsage: boolean;
  readonly #started = new Set<number>();
  #fingerprint: string | undefined;
  #usage: Usage | null = null;

  constructor(options: { model: string; includeUsage: boolean }) {
    this.#model = options.model;
    this.#includeUsage = options.includeUsage;
  }

  *accept(chunk: ChatCompletionChunk): Generator<OutChunk> {
    this.#fingerprint ??= chunk.system_fingerprint ?? undefined;
    if (chunk.usage) this.#usage = toUsage(chunk.usage);
    for (const choice of chunk.choices ?? []) {
      const index = choice.index ?? 0;
      if (!this.#started.has(index)) {
        this.#started.add(index);
        yield this.#chunk(index, { role: 'assistant', content: '' }, null, null);
      }
      const { role: _role, ...delta } = (choice.delta ?? {}) as Record<string, unknown>;
      if (hasPayload(delta)) yield this.#chunk(index, stripEmpty(delta), choice.logprobs ?? null, null);
      if (choice.finish_reason) yield this.#chunk(index, {}, null, choice.finish_reason);
    }
  }

  /** The usage chunk (empty `choices`) when `stream_options.include_usage` was set. */
  *finish(): Generator<OutChunk> {
    if (!this.#includeUsage) return;
    yield { ...this.#base(), choices: [], usage: this.#usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } };
  }

  #chunk(index: number, delta: Record<string, unknown>, logprobs: unknown, finishReason: string | null): OutChunk {
    return { ...this.#base(), choices: [{ index, delta, logprobs, finish_reason: finishReason }] };
  }

  #base(): Omit<OutChunk, 'choices'> {
    return {
      id: this.#id,
      object: 'chat.completion.chunk',
      created: this.#created,
      model: this.#model,
      ...(this.#fingerprint ? { system_fingerprint: this.#fingerprint } : {}),
      // OpenAI sends usage: null on every chunk but the last when usage was asked for.
      ...(this.#includeUsage ? { usage: null } : {}),
    };
  }
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

function hasPayload(delta: Record<string, unknown>): boolean {
  return Object.entries(delta).some(([, v]) => v !== undefined && v !== null && v !== '' && !(Array.isArray(v) && v.length === 0));
}

function stripEmpty(delta: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(delta).filter(([, v]) => v !== undefined && v !== null));
}
