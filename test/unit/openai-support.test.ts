// The fake OpenAI upstream and the conformance validators are test infrastructure that other tests
// trust, so they are checked against each other and against the official SDK as a client.
import OpenAI from 'openai';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  CONFORMANCE_AVAILABLE,
  ConformanceError,
  SCHEMAS,
  conformanceErrors,
  validateChatCompletion,
  validateChatCompletionChunk,
  validateChatCompletionRequest,
  validateEmbeddingList,
  validateErrorBody,
  validateModel,
  validateModelList,
  warmUpConformance,
} from '../support/openai/conformance.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/openai/fake-upstream.ts';
import { parseOpenAiSse } from '../support/openai/sse.ts';
import { estimateTokens } from '../support/openai/wire.ts';

const KEY = 'sk-fake-upstream-test';
const MODEL = 'fake-chat-1';

let upstream: FakeUpstream;
let client: OpenAI;

beforeAll(() => {
  if (!CONFORMANCE_AVAILABLE) return;
  const timings = warmUpConformance();
  expect(Object.keys(timings.compileMs)).toEqual(expect.arrayContaining(Object.values(SCHEMAS)));
});

beforeEach(async () => {
  upstream = await startFakeUpstream({ requireApiKey: KEY });
  client = new OpenAI({ apiKey: KEY, baseURL: upstream.url, maxRetries: 0 });
});

afterEach(() => upstream.close());

function post(path: string, body: unknown, key = KEY): Promise<Response> {
  return fetch(upstream.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** Streams through the SDK, validating every chunk as it arrives. */
async function streamChunks(params: Omit<OpenAI.ChatCompletionCreateParamsStreaming, 'stream'>): Promise<OpenAI.ChatCompletionChunk[]> {
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
    validateChatCompletionChunk(chunk);
    chunks.push(chunk);
  }
  return chunks;
}

const hello = [{ role: 'user' as const, content: 'Say hello to the troupe' }];

describe('fake upstream: chat completions', () => {
  it('answers unscripted requests by echoing the last user message, and records them', async () => {
    const completion = await client.chat.completions.create({ model: MODEL, messages: hello });
    validateChatCompletion(completion);
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.choices[0]).toMatchObject({ index: 0, finish_reason: 'stop', logprobs: null, message: { role: 'assistant', content: 'Say hello to the troupe' } });
    expect(completion.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 });

    const [rec] = upstream.requests;
    expect(rec).toMatchObject({ method: 'POST', path: '/v1/chat/completions', outcome: 'completed', aborted: false });
    expect(rec?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(rec?.body).toMatchObject({ model: MODEL, messages: hello });
    validateChatCompletionRequest(rec?.body);
    expect(await upstream.nextRequest()).toBe(rec);
  });

  it('streams OpenAI-framed SSE with usage on a final chunk without choices', async () => {
    upstream.script({ text: 'Hello there, friend' });
    const chunks = await streamChunks({ model: MODEL, messages: hello, stream_options: { include_usage: true } });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hello there, friend');
    expect(chunks[0]?.choices[0]?.delta).toMatchObject({ role: 'assistant', content: '' });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-2)?.choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });

    const res = await post('/chat/completions', { model: MODEL, messages: hello, stream: true });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const body = parseOpenAiSse(await res.text());
    expect(body.done).toBe(true);
    body.chunks.forEach(validateChatCompletionChunk);
    // Without include_usage the field is absent, as with OpenAI.
    expect(body.chunks.every((c) => !Object.hasOwn(c as object, 'usage'))).toBe(true);
  });

  it('returns tool calls in a non-streamed message', async () => {
    upstream.script({ toolCalls: [{ name: 'wave', arguments: { target: 'bob' } }] });
    const completion = await client.chat.completions.create({ model: MODEL, messages: hello });
    validateChatCompletion(completion);
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    const call = choice?.message.tool_calls?.[0];
    expect(call?.type === 'function' && call.function).toEqual({ name: 'wave', arguments: '{"target":"bob"}' });
    expect(call?.id).toMatch(/^call_/);
  });

  it('streams tool calls like OpenAI: name first, arguments over several deltas', async () => {
    const args = { target: 'bob', style: 'enthusiastic' };
    upstream.script({ text: 'Waving now.', toolCalls: [{ name: 'wave', arguments: args }, { name: 'bow', arguments: {} }] });
    const chunks = await streamChunks({ model: MODEL, messages: hello });
    const toolDeltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    const first = toolDeltas.filter((d) => d.index === 0);
    expect(first[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'wave', arguments: '' } });
    expect(first.slice(1).every((d) => d.id === undefined && d.function?.name === undefined)).toBe(true);
    expect(first.length).toBeGreaterThan(3);
    expect(first.map((d) => d.function?.arguments ?? '').join('')).toBe(JSON.stringify(args));
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls');

    // The SDK's own accumulator must rebuild the same calls from those deltas.
    upstream.script({ text: 'Waving now.', toolCalls: [{ name: 'wave', arguments: args }, { name: 'bow', arguments: {} }] });
    const final = await client.chat.completions.stream({ model: MODEL, messages: hello }).finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe('Waving now.');
    expect(final.choices[0]?.message.tool_calls?.map((c) => c.type === 'function' && [c.function.name, c.function.arguments])).toEqual([
      ['wave', JSON.stringify(args)],
      ['bow', '{}'],
    ]);
  });

  it('serves n choices, streamed interleaved and not', async () => {
    upstream.script({ text: ['first answer', 'second answer'] }, { text: ['one', 'two words'] });
    const completion = await client.chat.completions.create({ model: MODEL, messages: hello, n: 2 });
    validateChatCompletion(completion);
    expect(completion.choices.map((c) => [c.index, c.message.content])).toEqual([[0, 'first answer'], [1, 'second answer']]);
    expect(completion.usage?.completion_tokens).toBe(4);

    const chunks = await streamChunks({ model: MODEL, messages: hello, n: 2 });
    const texts = ['', ''];
    for (const chunk of chunks) {
      expect(chunk.choices).toHaveLength(1);
      const choice = chunk.choices[0];
      if (choice) texts[choice.index] += choice.delta.content ?? '';
    }
    expect(texts).toEqual(['one', 'two words']);
    expect(chunks.slice(0, 2).map((c) => c.choices[0]?.index)).toEqual([0, 1]);
  });

  it('truncates at stop sequences and max tokens, and reports scripted finish reasons', async () => {
    upstream.script({ text: 'alpha beta. gamma' }, { text: 'one two three four' }, { finishReason: 'length' });
    const stopped = await client.chat.completions.create({ model: MODEL, messages: hello, stop: ['.', 'zzz'] });
    expect(stopped.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'alpha beta' } });
    const limited = await client.chat.completions.create({ model: MODEL, messages: hello, max_completion_tokens: 2 });
    expect(limited.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: 'one two' } });
    const chunks = await streamChunks({ model: MODEL, messages: hello });
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('length');
    expect(upstream.pendingScripts).toBe(0);
  });
});

describe('fake upstream: failures', () => {
  it('answers scripted HTTP errors before any byte, with an OpenAI error body', async () => {
    upstream.script({ error: { status: 500, type: 'server_error', message: 'upstream exploded' } });
    const error = await client.chat.completions.create({ model: MODEL, messages: hello }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error).toMatchObject({ status: 500, error: { message: 'upstream exploded', type: 'server_error', param: null, code: null } });

    upstream.script({ error: { status: 429, type: 'rate_limit_exceeded', message: 'slow down', headers: { 'retry-after': '7' } } });
    const res = await post('/chat/completions', { model: MODEL, messages: hello, stream: true });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    validateErrorBody(await res.json());
  });

  it('rejects a wrong API key with 401', async () => {
    const res = await post('/chat/completions', { model: MODEL, messages: hello }, 'sk-wrong');
    expect(res.status).toBe(401);
    const body = (await res.json()) as unknown;
    validateErrorBody(body);
    expect(body).toMatchObject({ error: { code: 'invalid_api_key' } });
    const bad = new OpenAI({ apiKey: 'sk-wrong', baseURL: upstream.url, maxRetries: 0 });
    await expect(bad.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('breaks a stream mid-way when scripted, which the client sees as an error', async () => {
    upstream.script({ text: 'this reply never ends properly', failAfterChunks: 2 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: hello, stream: true });
    await expect(async () => {
      for await (const chunk of stream) validateChatCompletionChunk(chunk);
    }).rejects.toThrow();
    const rec = upstream.requests[0];
    expect(await rec?.settled).toBe('broken');
    expect(rec?.aborted).toBe(false);
    expect(upstream.aborts).toBe(0);
  });

  it('breaks a stalled stream on demand, after the client has read what was sent', async () => {
    upstream.script({ text: 'one two three four five', stallAfterChunks: 3 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: hello, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { value } = await iterator.next();
      seen.push((value as OpenAI.ChatCompletionChunk | undefined)?.choices[0]?.delta.content ?? '');
    }
    expect(seen).toEqual(['', 'one ', 'two ']);
    const rec = await upstream.nextRequest();
    rec.breakOff();
    await expect(iterator.next()).rejects.toThrow();
    expect(await rec.settled).toBe('broken');
    expect(upstream.aborts).toBe(0);
  });

  it('records a client that leaves a stalled stream as an abort', async () => {
    upstream.script({ text: 'never finished', stallAfterChunks: 1 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: hello, stream: true });
    for await (const chunk of stream) {
      validateChatCompletionChunk(chunk);
      break; // the SDK aborts the request on break
    }
    const rec = await upstream.nextAbort();
    expect(rec).toMatchObject({ path: '/v1/chat/completions', aborted: true, outcome: 'aborted' });
    expect(upstream.aborts).toBe(1);
  });

  it('records an abort of a slow stream through the abort controller', async () => {
    upstream.script({ text: 'a b c d e f g h i j k l m n o p', chunkDelayMs: 50 });
    const stream = await client.chat.completions.create({ model: MODEL, messages: hello, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    stream.controller.abort();
    expect(await (await upstream.nextAbort()).settled).toBe('aborted');
    expect(upstream.requests[0]?.aborted).toBe(true);
  });
});

describe('fake upstream: streaming mechanics', () => {
  it('delivers a long stream intact through backpressure', async () => {
    const text = Array.from({ length: 20_000 }, (_, i) => `w${i}`).join(' ');
    upstream.script({ text });
    const res = await post('/chat/completions', { model: MODEL, messages: hello, stream: true });
    const body = parseOpenAiSse(await res.text());
    expect(body.done).toBe(true);
    const chunks = body.chunks as OpenAI.ChatCompletionChunk[];
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(text);
    validateChatCompletionChunk(chunks[1]);
  });

  it('ends stalled streams on close as a shutdown, not a client abort', async () => {
    upstream.script({ text: 'held open', stallAfterChunks: 1 });
    const res = await post('/chat/completions', { model: MODEL, messages: hello, stream: true });
    const reader = res.body?.getReader();
    await reader?.read();
    const rec = await upstream.nextRequest();
    await upstream.close();
    expect(await rec.settled).toBe('shutdown');
    expect(upstream.aborts).toBe(0);
    await expect(upstream.nextAbort()).rejects.toThrow(/closed/);
    await reader?.cancel().catch(() => {});
  });
});

describe('fake upstream: models and embeddings', () => {
  it('lists and retrieves models', async () => {
    const res = await fetch(`${upstream.url}/models`, { headers: { authorization: `Bearer ${KEY}` } });
    validateModelList(await res.json());
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['fake-chat-1', 'fake-embed-1']);
    validateModel(await client.models.retrieve('fake-embed-1'));
    await expect(client.models.retrieve('nope')).rejects.toBeInstanceOf(OpenAI.NotFoundError);

    const custom = await startFakeUpstream({ models: ['only-one'] });
    try {
      const list = await new OpenAI({ apiKey: 'any', baseURL: custom.url }).models.list();
      expect(list.data.map((m) => m.id)).toEqual(['only-one']);
    } finally {
      await custom.close();
    }
  });

  it('embeds deterministically in float and base64 encodings', async () => {
    const res = await post('/embeddings', { model: 'fake-embed-1', input: ['red door', 'blue door'], dimensions: 5, encoding_format: 'float' });
    const floats = (await res.json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
    validateEmbeddingList(floats);
    expect(floats.usage.prompt_tokens).toBe(estimateTokens('red door blue door'));

    // The SDK asks for base64 unless told otherwise and decodes it back to floats.
    const viaSdk = await client.embeddings.create({ model: 'fake-embed-1', input: ['red door', 'blue door'], dimensions: 5 });
    expect(viaSdk.data.map((d) => d.embedding)).toEqual(floats.data.map((d) => d.embedding));
    const [red, blue] = viaSdk.data.map((d) => d.embedding);
    expect(red).toHaveLength(5);
    expect(red).not.toEqual(blue);
    expect(Math.hypot(...(red ?? []))).toBeCloseTo(1, 5);
    const single = await client.embeddings.create({ model: 'fake-embed-1', input: 'red door', dimensions: 5 });
    expect(single.data[0]?.embedding).toEqual(red);
  });
});

describe.skipIf(!CONFORMANCE_AVAILABLE)('conformance validators', () => {
  const chunk = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'm', choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }] };

  it('reject a completion without choices, naming the violation', () => {
    const broken = { id: 'chatcmpl-1', object: 'chat.completion', created: 1_700_000_000, model: 'm' };
    expect(() => validateChatCompletion(broken)).toThrow(ConformanceError);
    expect(() => validateChatCompletion(broken)).toThrow(/\(root\) must have required property 'choices'/);
  });

  it('list every violation with JSON pointers', () => {
    const broken = { ...chunk, object: 'chat.completion', created: Date.now(), choices: [{ index: 0, delta: {}, finish_reason: 'done' }] };
    const errors = conformanceErrors(SCHEMAS.chatCompletionChunk, broken);
    expect(errors.join('\n')).toMatch(/^\/object must be equal to one of the allowed values \("chat.completion.chunk"\)/m);
    expect(errors.join('\n')).toMatch(/^\/created must match format "unixtime"/m);
    expect(errors.join('\n')).toMatch(/^\/choices\/0\/finish_reason /m);
  });

  it('accept the null finish_reason the document marks with the 3.0 nullable keyword', () => {
    expect(() => validateChatCompletionChunk(chunk)).not.toThrow();
    expect(() => validateChatCompletionChunk({ ...chunk, usage: null })).not.toThrow();
  });

  it('keep the document strict about fields compatible servers tend to omit', () => {
    const message = { role: 'assistant', content: 'hi' };
    const completion = { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message, finish_reason: 'stop' }] };
    expect(conformanceErrors(SCHEMAS.chatCompletion, completion)).toEqual([
      "/choices/0 must have required property 'logprobs' [schema #/properties/choices/items/required]",
      "/choices/0/message must have required property 'refusal' [schema #/required]",
    ]);
    expect(() => validateErrorBody({ error: { message: 'x', type: 'y' } })).toThrow(/'param'[\s\S]*'code'/);
    expect(() => validateModel({ id: 'm', object: 'model' })).toThrow(/'created'[\s\S]*'owned_by'/);
  });
});
