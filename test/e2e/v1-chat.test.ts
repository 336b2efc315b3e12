import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { validateChatCompletion, validateErrorBody, validateModel, validateModelList } from '../support/openai/conformance.ts';
import { createCaptainRook, startV1Fixture, type V1Fixture } from '../support/v1.ts';

type UpstreamBody = { model: string; messages: { role: string; content: string }[]; tools?: { function: { name: string; description?: string; parameters: unknown } }[]; [k: string]: unknown };

describe.each(BACKENDS)('/v1 models and non-streaming completions on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string; name: string };
  let waveId: string;

  beforeAll(async () => {
    f = await startV1Fixture(backend);
    ({ character, waveId } = await createCaptainRook(f.api));
  });
  afterAll(() => f.close());

  it("lists the upstream's models and the project's characters, in the conformance shape", async () => {
    const raw = await f.api.get('/v1/models').expect(200);
    validateModelList(raw);
    const ids = raw.data.map((m: { id: string }) => m.id);
    expect(ids).toEqual(expect.arrayContaining(['fake-chat-1', character.id]));
    const viaSdk = [];
    for await (const model of f.openai.models.list()) viaSdk.push(model.id);
    expect(viaSdk).toEqual(ids);
  });

  it('retrieves a character or upstream model, and 404s model_not_found otherwise', async () => {
    const model = await f.openai.models.retrieve(character.id);
    validateModel(model);
    expect(model).toMatchObject({ id: character.id, object: 'model', owned_by: expect.any(String), created: expect.any(Number) });
    expect((await f.openai.models.retrieve('fake-chat-1')).id).toBe('fake-chat-1');
    const missing = await f.api.get('/v1/models/character_nope');
    expect(missing.status).toBe(404);
    validateErrorBody(missing.body);
    expect(missing.body.error).toMatchObject({ code: 'model_not_found', type: 'invalid_request_error', param: 'model' });
    await expect(f.openai.models.retrieve('no-such-model')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it("answers as the character: its prompt first, its capabilities as tools, INFERENCE_MODEL upstream, the character id back", async () => {
    f.upstream.script({ text: 'Aye, what do you want?' });
    const completion = await f.openai.chat.completions.create({
      model: character.id,
      stream: false,
      messages: [{ role: 'user', content: 'Hello captain' }],
      temperature: 0.4,
      seed: 7,
      max_tokens: 50,
    });
    validateChatCompletion(completion);
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: character.id,
      choices: [{ index: 0, message: { role: 'assistant', content: 'Aye, what do you want?' }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), total_tokens: expect.any(Number) },
    });
    const sent = (await lastChatRequest(f)).body as UpstreamBody;
    expect(sent.model).toBe('fake-chat-1');
    expect(sent.messages[0]?.role).toBe('system');
    expect(sent.messages[0]?.content).toContain('Captain Rook');
    expect(sent.messages[0]?.content).toContain('A gruff harbour master.');
    expect(sent.messages.slice(1)).toEqual([{ role: 'user', content: 'Hello captain' }]);
    expect(sent).toMatchObject({ temperature: 0.4, seed: 7, max_tokens: 50 });
    expect(sent.tools?.map((t) => t.function.name)).toEqual(['wave']);
    expect(sent.tools?.[0]?.function.parameters).toEqual({
      type: 'object',
      properties: { target: { type: 'string', description: 'Who to wave at' } },
      required: ['target'],
      additionalProperties: false,
    });
  });

  it("returns capability calls as tool_calls, and the caller's tool wins a name clash", async () => {
    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: { target: 'the player' } }] });
    const completion = await f.openai.chat.completions.create({
      model: character.id,
      stream: false,
      messages: [{ role: 'user', content: 'Wave at me' }],
      tools: [
        { type: 'function', function: { name: 'wave', description: 'caller version', parameters: { type: 'object', properties: {} } } },
        { type: 'function', function: { name: 'jump', parameters: { type: 'object', properties: {} } } },
      ],
      tool_choice: 'auto',
    });
    validateChatCompletion(completion);
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    const call = choice?.message.tool_calls?.[0];
    expect(call?.type).toBe('function');
    expect(call?.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ target: 'the player' });
    const sent = (await lastChatRequest(f)).body as UpstreamBody;
    expect(sent.tools?.map((t) => [t.function.name, t.function.description])).toEqual([
      ['wave', 'caller version'],
      ['jump', undefined],
    ]);
    expect(sent.tool_choice).toBe('auto');
  });

  it('supports n, stop, tool messages and json response formats', async () => {
    f.upstream.script({ text: ['first', 'second'] });
    const two = await f.openai.chat.completions.create({ model: character.id, stream: false, n: 2, messages: [{ role: 'user', content: 'hi' }] });
    validateChatCompletion(two);
    expect(two.choices.map((c) => [c.index, c.message.content])).toEqual([[0, 'first'], [1, 'second']]);

    f.upstream.script({ text: 'one two STOP three' });
    const stopped = await f.openai.chat.completions.create({ model: character.id, stream: false, stop: ['STOP'], messages: [{ role: 'user', content: 'count' }] });
    expect(stopped.choices[0]?.message.content).toBe('one two ');
    expect((await lastChatRequest(f)).body).toMatchObject({ stop: ['STOP'] });

    const history = await f.openai.chat.completions.create({
      model: character.id,
      stream: false,
      response_format: { type: 'json_schema', json_schema: { name: 'reply', schema: { type: 'object' } } },
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Wave' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'wave', arguments: '{"target":"me"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"ok":true}' },
      ],
    });
    validateChatCompletion(history);
    const sent = (await lastChatRequest(f)).body as UpstreamBody;
    expect(sent.messages.map((m) => m.role)).toEqual(['system', 'system', 'user', 'assistant', 'tool']);
    expect(sent.response_format).toMatchObject({ type: 'json_schema' });
  });

  it('proxies any model the upstream lists as is', async () => {
    f.upstream.script({ text: 'plain model' });
    const completion = await f.openai.chat.completions.create({ model: 'fake-chat-1', stream: false, messages: [{ role: 'user', content: 'x' }] });
    expect(completion.model).toBe('fake-chat-1');
    const sent = (await lastChatRequest(f)).body as UpstreamBody;
    expect(sent.messages).toEqual([{ role: 'user', content: 'x' }]);
    expect(sent.tools).toBeUndefined();
  });

  it.each([
    [{ temperature: 3 }, 'temperature'],
    [{ top_p: 1.5 }, 'top_p'],
    [{ frequency_penalty: -3 }, 'frequency_penalty'],
    [{ presence_penalty: 2.5 }, 'presence_penalty'],
    [{ n: 0 }, 'n'],
    [{ seed: 1.5 }, 'seed'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ max_completion_tokens: -1 }, 'max_completion_tokens'],
    [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
    [{ stop: 5 }, 'stop'],
    [{ messages: [] }, 'messages'],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
    [{ messages: [{ role: 'assistant' }] }, 'messages[0]'],
    [{ tools: Array.from({ length: 129 }, (_, i) => ({ type: 'function', function: { name: `f${i}` } })) }, 'tools'],
    [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0].function.name'],
    [{ tool_choice: 'sometimes' }, 'tool_choice'],
    [{ tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ response_format: { type: 'yaml' } }, 'response_format.type'],
    [{ stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage'],
    [{ model: undefined }, 'model'],
    [{ temperatur: 1 }, 'temperatur'],
  ])('rejects %j with 400 naming %s', async (patch, param) => {
    const before = f.upstream.requests.length;
    const body = { model: character.id, stream: false, messages: [{ role: 'user', content: 'hi' }], ...patch };
    const res = await f.api.post('/v1/chat/completions', body);
    expect(res.status).toBe(400);
    validateErrorBody(res.body);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(f.upstream.requests.length).toBe(before);
  });

  it('maps errors to the SDK: 401, 404 model_not_found, 400 param', async () => {
    const bad = new OpenAI({ baseURL: `${f.t.url}/v1`, apiKey: 'sk-troupe-wrongwrongwrongwrong', maxRetries: 0 });
    await expect(bad.chat.completions.create({ model: character.id, stream: false, messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
    await expect(f.openai.chat.completions.create({ model: 'character_gone', stream: false, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
      param: 'model',
    });
    await expect(f.openai.chat.completions.create({ model: character.id, stream: false, temperature: 9, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 400,
      param: 'temperature',
    });
  });

  it('answers 502 with an api_error body when the upstream fails before the first byte', async () => {
    f.upstream.script({ error: { status: 500, type: 'server_error', message: 'GPU on fire' } });
    const res = await f.api.post('/v1/chat/completions', { model: character.id, stream: false, messages: [{ role: 'user', content: 'x' }] });
    expect(res.status).toBe(502);
    validateErrorBody(res.body);
    expect(res.body.error.type).toBe('api_error');
    expect(res.body.error.message).toContain('GPU on fire');
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('keeps capability changes visible to the next completion', async () => {
    await f.api.delete(`/characters/${character.id}/capabilities/${waveId}`).expect(200);
    await f.openai.chat.completions.create({ model: character.id, stream: false, messages: [{ role: 'user', content: 'x' }] });
    expect(((await lastChatRequest(f)).body as UpstreamBody).tools).toBeUndefined();
    await f.api.post(`/characters/${character.id}/capabilities`, { capabilityId: waveId }).expect(200);
  });
});

async function lastChatRequest(f: V1Fixture) {
  const requests = f.upstream.requests.filter((r) => r.path === '/v1/chat/completions');
  const last = requests.at(-1);
  if (!last) throw new Error('the upstream saw no chat completion');
  expect(last.headers.authorization).toBe('Bearer upstream-secret');
  return last;
}
