/**
 * What the benchmarks' fake upstream (upstream-server.ts) answers, shared by the upstream (which
 * sends it) and the benchmarks (which check what came back).
 *
 * Two kinds of reply, chosen by the last user message of the request:
 *   - it starts with STAMP_PREFIX: a "stamped" stream. Every content chunk reads ` <i>@<µs>`, the
 *     chunk's index and the CLOCK_MONOTONIC microsecond at which the upstream handed it to its
 *     socket, so a receiver can tell how long the chunk took to reach it (same clock in every
 *     process of the machine).
 *   - anything else: the same fixed reply of N word tokens, streamed or not as asked.
 */

export const BENCH_MODEL = 'fake-chat-1';
export const UPSTREAM_READY_MSG = 'bench upstream listening';
export const STAMP_PREFIX = '#stamp';
/** Returns (and forgets) the raw body of the last fixed-reply chat request the upstream got. */
export const LAST_BODY_PATH = '/bench/last-fixed-body';

const WORDS = [
  'Keep', 'your', 'voice', 'down', 'traveller', 'the', 'guards', 'change', 'at', 'the', 'bell', 'and', 'the', 'east',
  'gate', 'stays', 'unwatched', 'for', 'as', 'long', 'as', 'it', 'takes', 'to', 'drink', 'a', 'mug', 'of', 'cider',
  'so', 'be', 'quick', 'and', 'bring', 'me', 'the', 'lantern', 'oil', 'you', 'promised',
];

/** The fixed reply split into `tokens` word tokens; they join back to fixedReplyText(tokens). */
function fixedReplyTokens(tokens: number): string[] {
  return Array.from({ length: tokens }, (_, i) => `${i === 0 ? '' : ' '}${WORDS[i % WORDS.length] ?? 'word'}`);
}

function fixedReplyText(tokens: number): string {
  return fixedReplyTokens(tokens).join('');
}

/** The body Troupe's POST /perform answers for the fixed reply. */
export function expectedPerformBody(tokens: number): string {
  return JSON.stringify([{ type: 'text', content: fixedReplyText(tokens).trim() }]);
}

/** Content of stamped chunk `index`, written at `micros` (CLOCK_MONOTONIC µs). */
export function stampText(index: number, micros: bigint): string {
  return ` ${index}@${micros}`;
}

const STAMP = /(\d+)@(\d+)/g;

/** Every stamp in a piece of text (normally one per chunk). */
export function parseStamps(text: string): { index: number; micros: number }[] {
  const out: { index: number; micros: number }[] = [];
  for (const match of text.matchAll(STAMP)) out.push({ index: Number(match[1]), micros: Number(match[2]) });
  return out;
}

interface ChunkHead {
  id: string;
  created: number;
  model: string;
}

/** One SSE frame of a chat.completion.chunk with a single choice. */
export function chunkFrame(head: ChunkHead, delta: Record<string, unknown>, finishReason: string | null): string {
  const chunk = {
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    system_fingerprint: 'fp_conv_bench',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  };
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

export const DONE_FRAME = 'data: [DONE]\n\n';

/** All frames of the fixed reply: role chunk, one chunk per token, finish chunk, [DONE]. */
export function fixedFrames(model: string, tokens: number): string[] {
  const head = { id: 'chatcmpl-convbench-fixed', created: 1_700_000_000, model };
  return [
    chunkFrame(head, { role: 'assistant', content: '' }, null),
    ...fixedReplyTokens(tokens).map((token) => chunkFrame(head, { content: token }, null)),
    chunkFrame(head, {}, 'stop'),
    DONE_FRAME,
  ];
}

/** The non-streamed chat.completion of the fixed reply. */
export function fixedCompletion(model: string, tokens: number): string {
  return JSON.stringify({
    id: 'chatcmpl-convbench-fixed',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: fixedReplyText(tokens), refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 50, completion_tokens: tokens, total_tokens: 50 + tokens },
  });
}
