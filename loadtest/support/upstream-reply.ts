/**
 * The wire of the one fake upstream (upstream-server.ts), shared with the benchmarks that check it.
 * Chat replies, by the last user message: STAMP_PREFIX gets a stream whose chunks read ` <i>@<µs>`
 * (index, CLOCK_MONOTONIC µs written); with BENCH_REPLY=echo, `Re: <message>` then words; else a
 * fixed reply of N word tokens.
 */
import { launch, type Launched } from './children.ts';
import { ROOT, troupeEnv } from './troupe.ts';

export const BENCH_MODEL = 'fake-chat-1';
export const UPSTREAM_READY_MSG = 'bench upstream listening';
export const STAMP_PREFIX = '#stamp';
/** Returns (and forgets) the raw body of the last fixed-reply chat request. */
export const LAST_BODY_PATH = '/bench/last-fixed-body';

/** Starts upstream-server.ts with these BENCH_* settings, on any free port. */
export function startUpstream(settings: Record<string, string>): Promise<Launched> {
  const env = troupeEnv({ BENCH_UPSTREAM_PORT: '0', ...settings });
  return launch({ name: 'upstream', command: process.execPath, args: ['loadtest/support/upstream-server.ts'], env, cwd: ROOT, readyMsg: UPSTREAM_READY_MSG, readyTimeoutMs: 30_000 });
}

const WORDS = 'Keep your voice down traveller the guards change at the bell and the east gate stays unwatched for as long as it takes to drink a mug of cider so be quick and bring me the lantern oil you promised'.split(' ');

/** The fixed reply as `tokens` word tokens. */
export const fixedReplyTokens = (tokens: number): string[] => Array.from({ length: tokens }, (_, i) => `${i === 0 ? '' : ' '}${WORDS[i % WORDS.length] ?? 'word'}`);

/** The body Troupe's POST /perform answers for the fixed reply. */
export const expectedPerformBody = (tokens: number): string => JSON.stringify([{ type: 'text', content: fixedReplyTokens(tokens).join('').trim() }]);

const ECHO_WORDS = ['and', 'so', 'the', 'story', 'goes', 'on', 'for', 'a', 'while', 'longer'];

/** The echo reply to `said`, `tokens` tokens in all. */
export const echoReplyTokens = (said: string, tokens: number): string[] =>
  ['Re:', said, ...Array.from({ length: Math.max(0, tokens - 2) }, (_, i) => ECHO_WORDS[i % ECHO_WORDS.length] ?? '')].map((w, i) => (i === 0 ? w : ` ${w}`));

/** The message an echo reply answers, or null when it is not one. */
export const echoedMessage = (content: string): string | null => /^Re: (\S+)/.exec(content)?.[1] ?? null;

export const stampText = (index: number, micros: bigint): string => ` ${index}@${micros}`;

/** Every stamp in a piece of text (normally one per chunk). */
export const parseStamps = (text: string): { index: number; micros: number }[] => [...text.matchAll(/(\d+)@(\d+)/g)].map((m) => ({ index: Number(m[1]), micros: Number(m[2]) }));

/** One SSE frame of a chat.completion.chunk with a single choice. */
export function chunkFrame(head: { id: string; created: number; model: string }, delta: Record<string, unknown>, finishReason: string | null): string {
  const chunk = { id: head.id, object: 'chat.completion.chunk', created: head.created, model: head.model, system_fingerprint: 'fp_conv_bench', choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] };
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

export const DONE_FRAME = 'data: [DONE]\n\n';

/** Role chunk, one chunk per token, finish chunk, [DONE]. */
export function replyFrames(model: string, tokens: readonly string[], id = 'chatcmpl-convbench-fixed'): string[] {
  const head = { id, created: 1_700_000_000, model };
  return [chunkFrame(head, { role: 'assistant', content: '' }, null), ...tokens.map((content) => chunkFrame(head, { content }, null)), chunkFrame(head, {}, 'stop'), DONE_FRAME];
}

/** The non-streamed chat.completion of a reply. */
export function completionBody(model: string, tokens: readonly string[]): string {
  return JSON.stringify({
    id: 'chatcmpl-convbench-fixed', object: 'chat.completion', created: 1_700_000_000, model,
    choices: [{ index: 0, message: { role: 'assistant', content: tokens.join(''), refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 50, completion_tokens: tokens.length, total_tokens: 50 + tokens.length },
  });
}
