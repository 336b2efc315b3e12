/**
 * The wire of the fake upstream (servers.ts), shared with the benchmarks that check it. Chat
 * replies, by the last user message: STAMP_PREFIX gets a stream whose chunks read ` <i>@<µs>`
 * (index, CLOCK_MONOTONIC µs written); with BENCH_REPLY=echo, `Re: <message>` then words; else a
 * fixed reply of N word tokens.
 */
import { childEnv, launch, ROOT, type Launched } from './children.ts';

export const BENCH_MODEL = 'fake-chat-1';
export const SERVER_READY_MSG = 'bench server listening';
export const STAMP_PREFIX = '#stamp';
/** Returns (and forgets) the raw body of the last fixed-reply chat request. */
export const LAST_BODY_PATH = '/bench/last-fixed-body';

/** Starts servers.ts `kind` (upstream, pipe, bare node|uws) with these BENCH_* settings. */
export function startServer(kind: string[], settings: Record<string, string> = {}, command = process.execPath): Promise<Launched> {
  const args = ['loadtest/support/servers.ts', ...kind];
  return launch({ name: kind.join('-'), command, args, env: childEnv(settings), cwd: ROOT, readyMsg: SERVER_READY_MSG });
}

export const startUpstream = (settings: Record<string, string>): Promise<Launched> => startServer(['upstream'], settings);

const WORDS = ('Keep your voice down traveller the guards change at the bell and the east gate stays unwatched for as long as it ' +
  'takes to drink a mug of cider so be quick and bring me the lantern oil you promised').split(' ');

/** The fixed reply as `tokens` word tokens. */
export const fixedReplyTokens = (tokens: number): string[] =>
  Array.from({ length: tokens }, (_, i) => `${i === 0 ? '' : ' '}${WORDS[i % WORDS.length] ?? 'word'}`);

/** The body Troupe's POST /perform answers for the fixed reply. */
export const expectedPerformBody = (tokens: number): string =>
  JSON.stringify([{ type: 'text', content: fixedReplyTokens(tokens).join('').trim() }]);

const ECHO_WORDS = ['and', 'so', 'the', 'story', 'goes', 'on', 'for', 'a', 'while', 'longer'];

/** The echo reply to `said`, `tokens` tokens in all. */
export const echoReplyTokens = (said: string, tokens: number): string[] =>
  ['Re:', said, ...Array.from({ length: Math.max(0, tokens - 2) }, (_, i) => ECHO_WORDS[i % ECHO_WORDS.length] ?? '')]
    .map((w, i) => (i === 0 ? w : ` ${w}`));

/** The message an echo reply answers, or null when it is not one. */
export const echoedMessage = (content: string): string | null => /^Re: (\S+)/.exec(content)?.[1] ?? null;

export const stampText = (index: number, micros: bigint): string => ` ${index}@${micros}`;

/** Every stamp in a piece of text (normally one per chunk). */
export const parseStamps = (text: string): { index: number; micros: number }[] =>
  [...text.matchAll(/(\d+)@(\d+)/g)].map((m) => ({ index: Number(m[1]), micros: Number(m[2]) }));

export function lastUserText(messages: unknown): string {
  type Message = { role?: unknown; content?: unknown } | null;
  const m = (Array.isArray(messages) ? (messages as Message[]) : []).findLast((x) => x?.role === 'user');
  if (typeof m?.content === 'string') return m.content;
  if (!Array.isArray(m?.content)) return '';
  return (m.content as { text?: unknown }[]).map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
}

type Head = { id: string; created: number; model: string };

/** One SSE frame of a chat.completion.chunk with a single choice. */
export function chunkFrame(head: Head, delta: Record<string, unknown>, finishReason: string | null): string {
  const choices = [{ index: 0, delta, logprobs: null, finish_reason: finishReason }];
  const { id, created, model } = head;
  const chunk = { id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_conv_bench', choices };
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

export const DONE_FRAME = 'data: [DONE]\n\n';

/** Role chunk, one chunk per token, finish chunk, [DONE]. */
export function replyFrames(model: string, tokens: readonly string[]): string[] {
  const head = { id: 'chatcmpl-convbench-fixed', created: 1_700_000_000, model };
  const content = tokens.map((c) => chunkFrame(head, { content: c }, null));
  return [chunkFrame(head, { role: 'assistant', content: '' }, null), ...content, chunkFrame(head, {}, 'stop'), DONE_FRAME];
}

/** The non-streamed chat.completion of a reply. */
export function completionBody(model: string, tokens: readonly string[]): string {
  const message = { role: 'assistant', content: tokens.join(''), refusal: null };
  return JSON.stringify({
    id: 'chatcmpl-convbench-fixed', object: 'chat.completion', created: 1_700_000_000, model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 50, completion_tokens: tokens.length, total_tokens: 50 + tokens.length },
  });
}
