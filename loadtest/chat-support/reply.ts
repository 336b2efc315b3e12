/**
 * The one completion every request of the chat-stream benchmark gets, shared by the benchmark
 * upstream (which sends it) and the load generator (which checks what came back).
 *
 * Wire shape follows OpenAI's streamed chat completions: a first chunk with the role and empty
 * content, one chunk per token, an empty delta with `finish_reason`, then (with
 * `stream_options.include_usage`) a usage chunk with empty `choices`, then `data: [DONE]`.
 */

/** Model id the benchmark upstream lists and answers as. */
export const BENCH_MODEL = 'fake-chat-1';

/** The stdout `msg` the benchmark upstream prints once it listens. */
export const UPSTREAM_READY_MSG = 'chat bench upstream listening';

/**
 * Each request carries a fixed-width tag in the OpenAI `user` field (Troupe passes it on), so
 * the upstream can tell the load generator when that request arrived and when it wrote the
 * first and last chunk. Fixed width: every request body has the same size.
 */
export const TAG_PREFIX = 'bench-';
export function requestTag(n: number): string {
  return `${TAG_PREFIX}${String(n).padStart(10, '0')}`;
}

/** Path on the benchmark upstream that hands out (and forgets) the recorded timings. */
export const TIMINGS_PATH = '/bench/timings';

/** Upstream-side instants of one request, in ms on the machine's monotonic clock (process.hrtime). */
export interface UpstreamTiming {
  /** Request body fully read. */
  arrived: number;
  /** First chunk handed to the socket. */
  first: number;
  /** Response ended. */
  last: number;
}

/** ms on the monotonic clock every process on the machine shares (CLOCK_MONOTONIC). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

const WORDS = [
  'The', 'harbour', 'master', 'squints', 'at', 'the', 'fog', 'and', 'counts', 'the', 'masts', 'again',
  'before', 'he', 'answers', 'you', 'with', 'a', 'grunt', 'about', 'pirates', 'tides', 'and', 'unpaid',
  'mooring', 'fees', 'while', 'gulls', 'circle', 'over', 'the', 'old', 'stone', 'quay', 'and', 'lanterns',
  'sway', 'in', 'the', 'wind', 'near', 'the', 'gate',
];

/** The reply split into `tokens` word-sized pieces that join back to `replyText(tokens)`. */
export function replyTokens(tokens: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < tokens; i++) {
    const word = WORDS[i % WORDS.length] ?? 'word';
    out.push(i === 0 ? word : ` ${word}`);
  }
  return out;
}

export function replyText(tokens: number): string {
  return replyTokens(tokens).join('');
}

/**
 * SSE events a client receives for one streamed reply of `tokens` tokens with include_usage,
 * counting the final `[DONE]`: role chunk + tokens + finish chunk + usage chunk + [DONE]. Troupe
 * normalises every stream to the same sequence, so both paths must show this count.
 */
export function expectedEvents(tokens: number): number {
  return tokens + 4;
}

export interface ReplyOptions {
  model: string;
  tokens: number;
  includeUsage: boolean;
  promptTokens: number;
}

/** The SSE events of one streamed reply, each a complete `data: ...\n\n` frame, ready to write. */
export function sseFrames(options: ReplyOptions): Buffer[] {
  const head = {
    id: 'chatcmpl-bench0000000000000000',
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: options.model,
    service_tier: 'default',
    system_fingerprint: 'fp_bench',
  };
  const usageNull = options.includeUsage ? { usage: null } : {};
  const choice = (delta: Record<string, unknown>, finish: string | null) => ({
    ...head,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...usageNull,
  });
  const chunks: unknown[] = [choice({ role: 'assistant', content: '', refusal: null }, null)];
  for (const token of replyTokens(options.tokens)) chunks.push(choice({ content: token }, null));
  chunks.push(choice({}, 'stop'));
  if (options.includeUsage) {
    const usage = {
      prompt_tokens: options.promptTokens,
      completion_tokens: options.tokens,
      total_tokens: options.promptTokens + options.tokens,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
    chunks.push({ ...head, choices: [], usage });
  }
  const frames = chunks.map((c) => Buffer.from(`data: ${JSON.stringify(c)}\n\n`));
  frames.push(Buffer.from('data: [DONE]\n\n'));
  return frames;
}

/** The non-streamed `chat.completion` (for completeness: the benchmark streams). */
export function completionBody(options: ReplyOptions): string {
  return JSON.stringify({
    id: 'chatcmpl-bench0000000000000000',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: options.model,
    choices: [{ index: 0, message: { role: 'assistant', content: replyText(options.tokens), refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: options.promptTokens, completion_tokens: options.tokens, total_tokens: options.promptTokens + options.tokens },
    service_tier: 'default',
  });
}

export interface ParsedStream {
  text: string;
  events: number;
  done: boolean;
  finishReason: string | null;
  usage: unknown;
  /** Non-null when a frame was not valid JSON or was an error event. */
  problem: string | null;
}

/** Full parse of a received SSE body (used on samples, not on every request). */
export function parseSse(body: string): ParsedStream {
  const out: ParsedStream = { text: '', events: 0, done: false, finishReason: null, usage: undefined, problem: null };
  for (const frame of body.split('\n\n')) {
    if (!frame.trim()) continue;
    out.events++;
    const data = frame
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trimStart())
      .join('\n');
    if (data === '[DONE]') {
      out.done = true;
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      out.problem ??= `not JSON: ${data.slice(0, 120)}`;
      continue;
    }
    if (typeof parsed !== 'object' || parsed === null) continue;
    const chunk = parsed as { error?: unknown; choices?: unknown; usage?: unknown };
    if (chunk.error !== undefined) out.problem ??= `error event: ${JSON.stringify(chunk.error).slice(0, 200)}`;
    if (chunk.usage) out.usage = chunk.usage;
    if (!Array.isArray(chunk.choices)) continue;
    for (const c of chunk.choices as unknown[]) {
      const choice = c as { delta?: { content?: unknown }; finish_reason?: unknown };
      if (typeof choice.delta?.content === 'string') out.text += choice.delta.content;
      if (typeof choice.finish_reason === 'string') out.finishReason = choice.finish_reason;
    }
  }
  return out;
}
