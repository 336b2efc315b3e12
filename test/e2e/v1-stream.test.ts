import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { createServer } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { validateChatCompletionChunk, validateErrorBody } from '../support/openai/conformance.ts';
import { parseOpenAiSse } from '../support/openai/sse.ts';
import { startTestServer } from '../support/server.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';

type Chunk = OpenAI.Chat.Completions.ChatCompletionChunk;

describe.each(BACKENDS)('/v1 streaming on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string };

  beforeAll(async () => {
    f = await startV1Fixture(backend);
    const give = await f.api
      .post('/capabilities', {
        name: 'give_item',
        type: 'client_function_call',
        parameters: [
          { name: 'item', type: 'string', required: true },
          { name: 'count', type: 'integer' },
        ],
      })
      .expect(201);
    character = await f.api.post('/characters', { name: 'Mira', description: 'A shopkeeper.', capabilityGroupIds: [give.id] }).expect(201);
  });
  afterAll(() => f.close());

  /** Raw SSE through fetch, strictly parsed, every chunk validated against the conformance schema. */
  async function rawStream(body: Record<string, unknown>) {
    const res = await fetch(`${f.t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { res, text };
  }

  it('streams by default (no `stream` field), in the exact chunk sequence of the interface', async () => {
    f.upstream.script({ text: 'Welcome to my shop, traveller.' });
    const { res, text } = await rawStream({ model: character.id, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const { chunks, done } = parseOpenAiSse(text);
    expect(done).toBe(true);
    for (const c of chunks) validateChatCompletionChunk(c);
    const typed = chunks as Chunk[];
    expect(typed[0]?.choices[0]).toEqual({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
    const last = typed.at(-1);
    expect(last?.choices[0]).toEqual({ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' });
    const middle = typed.slice(1, -1);
    expect(middle.length).toBeGreaterThan(1);
    expect(middle.every((c) => c.choices[0]?.finish_reason === null && typeof c.choices[0]?.delta.content === 'string')).toBe(true);
    expect(middle.map((c) => c.choices[0]?.delta.content).join('')).toBe('Welcome to my shop, traveller.');
    expect(new Set(typed.map((c) => c.id)).size).toBe(1);
    expect(typed.every((c) => c.model === character.id && c.object === 'chat.completion.chunk')).toBe(true);
  });

  it('streams through the unmodified openai SDK', async () => {
    f.upstream.script({ text: 'Fine wares here.' });
    const stream = await f.openai.chat.completions.create({ model: character.id, stream: true, messages: [{ role: 'user', content: 'what do you sell?' }] });
    let text = '';
    for await (const chunk of stream) {
      validateChatCompletionChunk(chunk);
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(text).toBe('Fine wares here.');
  });

  it("streams a capability call as tool_call deltas the SDK reassembles", async () => {
    f.upstream.script({ toolCalls: [{ name: 'give_item', arguments: { item: 'lantern', count: 2 } }] });
    const stream = await f.openai.chat.completions.create({ model: character.id, stream: true, messages: [{ role: 'user', content: 'Two lanterns please' }] });
    const chunks: Chunk[] = [];
    for await (const chunk of stream) {
      validateChatCompletionChunk(chunk);
      chunks.push(chunk);
    }
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(deltas[0]).toMatchObject({ index: 0, id: expect.any(String), type: 'function', function: { name: 'give_item' } });
    expect(deltas.length).toBeGreaterThan(1);
    const args = deltas.map((d) => d.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toEqual({ item: 'lantern', count: 2 });
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls');

    f.upstream.script({ toolCalls: [{ name: 'give_item', arguments: { item: 'rope' } }] });
    const final = await f.openai.chat.completions
      .stream({ model: character.id, messages: [{ role: 'user', content: 'Rope' }] })
      .finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === 'function' && [call.function.name, JSON.parse(call.function.arguments)]).toEqual(['give_item', { item: 'rope' }]);
  });

  it('sends usage last when stream_options.include_usage is set, and streams every choice of n', async () => {
    f.upstream.script({ text: ['left', 'right'] });
    const { text } = await rawStream({ model: character.id, n: 2, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'pick' }] });
    const { chunks, done } = parseOpenAiSse(text);
    expect(done).toBe(true);
    for (const c of chunks) validateChatCompletionChunk(c);
    const typed = chunks as Chunk[];
    const usage = typed.at(-1);
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), total_tokens: expect.any(Number) });
    expect(typed.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    for (const index of [0, 1]) {
      const mine = typed.flatMap((c) => c.choices.filter((ch) => ch.index === index));
      expect(mine[0]?.delta).toEqual({ role: 'assistant', content: '' });
      expect(mine.at(-1)?.finish_reason).toBe('stop');
      expect(mine.map((ch) => ch.delta.content ?? '').join('')).toBe(index === 0 ? 'left' : 'right');
    }
  });

  it('answers an HTTP 502 when the upstream fails before the first byte', async () => {
    f.upstream.script({ error: { status: 503, type: 'server_error', message: 'overloaded' } });
    const { res, text } = await rawStream({ model: character.id, messages: [{ role: 'user', content: 'x' }] });
    expect(res.status).toBe(502);
    expect(res.headers.get('content-type')).toContain('application/json');
    validateErrorBody(JSON.parse(text));
    f.upstream.script({ error: { status: 500, type: 'server_error', message: 'down' } });
    await expect(f.openai.chat.completions.create({ model: character.id, stream: true, messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(
      OpenAI.InternalServerError,
    );
  });

  it('turns an upstream failure after the first byte into an in-stream error event', async () => {
    f.upstream.script({ text: 'one two three four five six', stallAfterChunks: 3 });
    const stream = await f.openai.chat.completions.create({ model: character.id, stream: true, messages: [{ role: 'user', content: 'x' }] });
    const upstreamRequest = f.upstream.requests.at(-1);
    const seen: string[] = [];
    const failure = (async () => {
      for await (const chunk of stream) {
        seen.push(chunk.choices[0]?.delta.content ?? '');
        if (seen.length === 2) upstreamRequest?.breakOff();
      }
    })();
    await expect(failure).rejects.toBeInstanceOf(OpenAI.APIError);
    expect(seen.length).toBeGreaterThanOrEqual(2);

    // Raw bytes: the error event comes after the chunks already sent, with no [DONE].
    f.upstream.script({ text: 'alpha beta gamma delta', stallAfterChunks: 3 });
    const res = await fetch(`${f.t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: character.id, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(200);
    const broken = f.upstream.requests.at(-1);
    const reader = res.body!.getReader();  
    let text = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      text += new TextDecoder().decode(r.value);
      if ((text.match(/\n\n/g) ?? []).length >= 2) broken?.breakOff();
    }
    const { chunks, done } = parseOpenAiSse(text);
    expect(done).toBe(false);
    for (const c of chunks.slice(0, -1)) validateChatCompletionChunk(c);
    const errorEvent = chunks.at(-1) as { error?: unknown };
    validateErrorBody(errorEvent);
    expect(errorEvent.error).toMatchObject({ type: 'api_error' });
  });

  it('aborts the upstream request when the client disconnects mid-stream', async () => {
    f.upstream.script({ text: 'a b c d e f g h i j k l m n o p', stallAfterChunks: 2 });
    const controller = new AbortController();
    const stream = await f.openai.chat.completions.create(
      { model: character.id, stream: true, messages: [{ role: 'user', content: 'talk' }] },
      { signal: controller.signal },
    );
    const aborted = f.upstream.nextAbort();
    for await (const _chunk of stream) {
      controller.abort();
      break;
    }
    const request = await aborted;
    expect(request.path).toBe('/v1/chat/completions');
    expect(await request.settled).toBe('aborted');
  });

  it("holds the inference server back while a client reads slowly, and loses nothing", async () => {
    // About 24 MB of reply: more than the sockets on both sides buffer before their writers wait.
    const words = Array.from({ length: 24_000 }, (_, i) => `${i}:${'x'.repeat(1_000)} `);
    f.upstream.script({ text: words.join('') });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${f.t.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
      });
      req.on('response', resolve).on('error', reject);
      req.end(JSON.stringify({ model: character.id, stream: true, messages: [{ role: 'user', content: 'Tell me everything.' }] }));
    });
    res.pause();
    // Troupe answers after the upstream's first chunk, so its request is the latest one.
    const upstream = f.upstream.requests.at(-1);
    if (!upstream) throw new Error('the upstream saw no request');
    // Troupe stopped reading the upstream while our socket was full, so the upstream had to wait.
    await upstream.backpressured;
    expect(upstream.outcome).toBe('pending');
    res.setEncoding('utf8');
    let text = '';
    res.on('data', (piece: string) => (text += piece)).resume();
    await once(res, 'end');
    const { chunks, done } = parseOpenAiSse(text);
    expect(done).toBe(true);
    const content = (chunks as Chunk[]).map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(content).toBe(words.join(''));
    expect(await upstream.settled).toBe('completed');
  });
});

describe.each(BACKENDS)('/v1 without a working upstream on $kind', (backend) => {
  it('answers 502 naming what to set when the upstream is unreachable or not configured', async () => {
    const port = await closedPort();
    const unreachable = await startTestServer(backend, {
      env: { INFERENCE_BASE_URL: `http://127.0.0.1:${port}/v1`, INFERENCE_MODEL: 'm', INFERENCE_MAX_RETRIES: '0' },
    });
    try {
      const { client } = await unreachable.newProject();
      const ch = await client.post('/characters', { name: 'Lonely' }).expect(201);
      for (const stream of [true, false]) {
        const res = await client.post('/v1/chat/completions', { model: ch.id, stream, messages: [{ role: 'user', content: 'x' }] });
        expect(res.status).toBe(502);
        validateErrorBody(res.body);
        expect(res.body.error.message).toContain('INFERENCE_BASE_URL');
      }
      // The model list needs the upstream too, but a character model can still be looked up.
      expect((await client.get('/v1/models')).status).toBe(502);
      await client.get(`/v1/models/${ch.id}`).expect(200);
    } finally {
      await unreachable.close();
    }

    const unconfigured = await startTestServer(backend);
    try {
      const { client } = await unconfigured.newProject();
      const ch = await client.post('/characters', { name: 'Alone' }).expect(201);
      const res = await client.post('/v1/chat/completions', { model: ch.id, messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(502);
      expect(res.body.error).toMatchObject({ type: 'api_error', code: 'inference_not_configured' });
      expect(res.body.error.message).toContain('INFERENCE_BASE_URL');
      // Characters are still listed as models.
      expect((await client.get('/v1/models').expect(200)).data.map((m: { id: string }) => m.id)).toEqual([ch.id]);
    } finally {
      await unconfigured.close();
    }
  });
});

/** A port nothing listens on: bind, note the port, close. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.each(BACKENDS)('/v1 upstream timeouts and retries on $kind', (backend) => {
  it('answers 502 when no token arrives within INFERENCE_FIRST_TOKEN_TIMEOUT_MS, and cancels the upstream call', async () => {
    const f = await startV1Fixture(backend, { INFERENCE_FIRST_TOKEN_TIMEOUT_MS: '200' });
    try {
      const ch = await f.api.post('/characters', { name: 'Silent' }).expect(201);
      f.upstream.script({ text: 'never sent', stallAfterChunks: 0 });
      const aborted = f.upstream.nextAbort();
      const res = await f.api.post('/v1/chat/completions', { model: ch.id, messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(502);
      expect(res.body.error).toMatchObject({ type: 'api_error', code: 'upstream_timeout' });
      expect(res.body.error.message).toContain('INFERENCE_FIRST_TOKEN_TIMEOUT_MS');
      expect((await aborted).path).toBe('/v1/chat/completions');
    } finally {
      await f.close();
    }
  });

  it('retries an upstream failure that happened before any byte reached the client', async () => {
    const f = await startV1Fixture(backend, { INFERENCE_MAX_RETRIES: '2' });
    try {
      const ch = await f.api.post('/characters', { name: 'Patient' }).expect(201);
      f.upstream.script({ error: { status: 503, type: 'server_error', message: 'busy' } }, { text: 'second time lucky' });
      const completion = await f.openai.chat.completions.create({ model: ch.id, stream: false, messages: [{ role: 'user', content: 'x' }] });
      expect(completion.choices[0]?.message.content).toBe('second time lucky');
      f.upstream.script({ error: { status: 503, type: 'server_error', message: 'busy' } }, { text: 'streamed after retry' });
      let text = '';
      for await (const c of await f.openai.chat.completions.create({ model: ch.id, stream: true, messages: [{ role: 'user', content: 'x' }] })) {
        text += c.choices[0]?.delta.content ?? '';
      }
      expect(text).toBe('streamed after retry');
      // A rejected request is the caller's to fix: not retried, and passed on as a 400.
      f.upstream.script({ error: { status: 400, type: 'invalid_request_error', message: 'context too long' } });
      const before = f.upstream.requests.length;
      const res = await f.api.post('/v1/chat/completions', { model: ch.id, stream: false, messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toContain('context too long');
      expect(f.upstream.requests.length).toBe(before + 1);
    } finally {
      await f.close();
    }
  });
});
