// Builders for OpenAI wire objects, kept apart from the HTTP server so the shapes can be read (and
// checked against the OpenAPI document) in one place. Plain JSON types: tests compare them as data.
import { createHash } from 'node:crypto';

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export interface ToolCallScript {
  name: string;
  /** An object is serialised with JSON.stringify; a string is sent verbatim (e.g. broken JSON). */
  arguments: Record<string, unknown> | string;
  id?: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; audio_tokens: number };
  completion_tokens_details: {
    reasoning_tokens: number;
    audio_tokens: number;
    accepted_prediction_tokens: number;
    rejected_prediction_tokens: number;
  };
}

/** What one choice says, before it is cut into a message or into deltas. */
export interface ChoicePlan {
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: FinishReason;
}

/** Common fields of one completion: every chunk of a stream repeats them. */
export interface CompletionHead {
  id: string;
  created: number;
  model: string;
}

export interface ErrorSpec {
  status: number;
  type: string;
  message: string;
  param?: string | null;
  code?: string | null;
  /** Extra response headers, e.g. retry-after on a 429. */
  headers?: Record<string, string>;
}

/**
 * Deterministic token estimate: one token per run of non-space characters. Exported so tests can
 * predict the usage a reply reports.
 */
export function estimateTokens(text: string): number {
  return text.match(/\S+/g)?.length ?? 0;
}

/** The text of a message's content, whether a string or an array of content parts. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts: string[] = [];
  for (const part of content as unknown[]) {
    if (isRecord(part) && typeof part.text === 'string') texts.push(part.text);
  }
  return texts.join('\n');
}

export function promptTokens(messages: unknown): number {
  if (!Array.isArray(messages)) return 0;
  let total = 0;
  for (const message of messages as unknown[]) {
    if (isRecord(message)) total += estimateTokens(contentText(message.content));
  }
  return total;
}

export function choiceTokens(plan: ChoicePlan): number {
  let total = estimateTokens(plan.content ?? '');
  for (const call of plan.toolCalls) total += estimateTokens(`${call.name} ${call.arguments}`);
  return total;
}

export function usage(prompt: number, completion: number): Usage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

/** A non-streamed `chat.completion`. */
export function chatCompletion(head: CompletionHead, plans: ChoicePlan[], totals: Usage): Record<string, unknown> {
  return {
    id: head.id,
    object: 'chat.completion',
    created: head.created,
    model: head.model,
    choices: plans.map((plan, index) => ({
      index,
      message: {
        role: 'assistant',
        content: plan.content,
        refusal: null,
        annotations: [],
        // OpenAI leaves tool_calls out entirely (rather than []) when the model called none.
        ...(plan.toolCalls.length > 0
          ? { tool_calls: plan.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })) }
          : {}),
      },
      logprobs: null,
      finish_reason: plan.finishReason,
    })),
    usage: totals,
    service_tier: 'default',
  };
}

/** One `chat.completion.chunk`; `usage` is present (as null) only when include_usage was asked for. */
export function chunk(
  head: CompletionHead,
  choices: Record<string, unknown>[],
  withUsage: boolean,
  chunkUsage: Usage | null = null,
): Record<string, unknown> {
  return {
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    service_tier: 'default',
    choices,
    ...(withUsage ? { usage: chunkUsage } : {}),
  };
}

function choiceDelta(index: number, delta: Record<string, unknown>, finishReason: FinishReason | null = null): Record<string, unknown> {
  return { index, delta, logprobs: null, finish_reason: finishReason };
}

/** Splits text into word-sized pieces that keep their spaces, so the pieces join back exactly. */
export function splitText(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

/** Splits a tool call's arguments the way OpenAI does: several small fragments, not one. */
export function splitArguments(args: string, size = 6): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < args.length; at += size) pieces.push(args.slice(at, at + size));
  return pieces;
}

/**
 * The deltas of one choice in order: the role first, then content pieces, then each tool call
 * (id, type and name on its first delta, arguments spread over the next ones), then an empty
 * delta carrying the finish reason.
 */
export function choiceDeltas(index: number, plan: ChoicePlan): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  if (plan.toolCalls.length > 0 && !plan.content) {
    out.push(choiceDelta(index, { role: 'assistant', content: null, refusal: null }));
  } else {
    out.push(choiceDelta(index, { role: 'assistant', content: '', refusal: null }));
    for (const piece of splitText(plan.content ?? '')) out.push(choiceDelta(index, { content: piece }));
  }
  plan.toolCalls.forEach((call, callIndex) => {
    out.push(choiceDelta(index, { tool_calls: [{ index: callIndex, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }));
    for (const piece of splitArguments(call.arguments)) {
      out.push(choiceDelta(index, { tool_calls: [{ index: callIndex, function: { arguments: piece } }] }));
    }
  });
  out.push(choiceDelta(index, {}, plan.finishReason));
  return out;
}

/** Interleaves the choices' deltas round-robin, as a server generating n choices at once would. */
export function interleave<T>(lists: T[][]): T[] {
  const out: T[] = [];
  const longest = Math.max(0, ...lists.map((list) => list.length));
  for (let step = 0; step < longest; step++) {
    for (const list of lists) {
      const item = list[step];
      if (item !== undefined) out.push(item);
    }
  }
  return out;
}

export function errorBody(spec: ErrorSpec): Record<string, unknown> {
  return { error: { message: spec.message, type: spec.type, param: spec.param ?? null, code: spec.code ?? null } };
}

export function model(id: string, created: number): Record<string, unknown> {
  return { id, object: 'model', created, owned_by: 'troupe-fake-upstream' };
}

/** A unit-length vector derived from the text, so equal inputs embed equally across runs. */
export function embedding(text: string, dimensions: number): number[] {
  const values: number[] = [];
  for (let i = 0; values.length < dimensions; i++) {
    const digest = createHash('sha256').update(`${i}\u0000${text}`).digest();
    for (let at = 0; at + 4 <= digest.length && values.length < dimensions; at += 4) {
      values.push(digest.readUInt32LE(at) / 0x7fffffff - 1);
    }
  }
  const norm = Math.hypot(...values) || 1;
  // Round through float32 so base64 and float encodings carry exactly the same numbers.
  return values.map((value) => Math.fround(value / norm));
}

/** The base64 form the SDK asks for by default: little-endian float32s. */
export function embeddingBase64(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
