import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { validateErrorBody, validateResponse, validateResponseCreateRequest } from '../support/openai/conformance.ts';
import { useResponsesFixture } from '../support/responses.ts';

// The streaming side of /v1/responses is in v1-responses-stream.test.ts.
describe.each(BACKENDS)('/v1/responses on $kind', (backend) => {
  const { f, character, lastChat, post } = useResponsesFixture(backend);

  it('answers a string input with a response object in the conformance shape', async () => {
    f.upstream.script({ text: 'Hello there.' });
    const response = await f.openai.responses.create({ model: 'fake-chat-1', input: 'Hi' });
    validateResponse(response);
    expect(response).toMatchObject({
      id: expect.stringMatching(/^resp_/),
      object: 'response',
      status: 'completed',
      model: 'fake-chat-1',
      error: null,
      incomplete_details: null,
      instructions: null,
      store: true,
      previous_response_id: null,
      tools: [],
      tool_choice: 'auto',
      text: { format: { type: 'text' } },
      metadata: {},
      output: [{ type: 'message', id: expect.stringMatching(/^msg_/), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello there.', annotations: [] }] }],
      usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
    });
    expect(response.output_text).toBe('Hello there.');
    expect(Number.isInteger(response.created_at)).toBe(true);
    const sent = lastChat();
    expect(sent).toMatchObject({ model: 'fake-chat-1', stream: false, messages: [{ role: 'user', content: 'Hi' }] });
    expect(sent.tools).toBeUndefined();
  });

  it('sends a message list after the instructions, with the sampling settings, and echoes them', async () => {
    f.upstream.script({ text: 'Fine.' });
    const body = {
      model: 'fake-chat-1',
      instructions: 'You are terse.',
      input: [
        { role: 'developer' as const, content: 'Answer in one word.' },
        { role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Hi' }] },
        { type: 'message' as const, role: 'assistant' as const, content: 'Hello!' },
        { role: 'user' as const, content: 'How are you?' },
      ],
      temperature: 0.3,
      top_p: 0.9,
      user: 'player-7',
      metadata: { level: '3' },
      parallel_tool_calls: false,
    };
    validateResponseCreateRequest(body);
    const response = await f.openai.responses.create(body);
    validateResponse(response);
    expect(response).toMatchObject({ instructions: 'You are terse.', temperature: 0.3, top_p: 0.9, user: 'player-7', metadata: { level: '3' }, parallel_tool_calls: false });
    const sent = lastChat();
    expect(sent.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'developer', content: 'Answer in one word.' },
      { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
      { role: 'assistant', content: 'Hello!' },
      { role: 'user', content: 'How are you?' },
    ]);
    expect(sent).toMatchObject({ temperature: 0.3, top_p: 0.9, user: 'player-7' });
    // parallel_tool_calls goes upstream only with tools; metadata and store are Troupe's.
    expect(sent).not.toHaveProperty('parallel_tool_calls');
    expect(sent).not.toHaveProperty('metadata');
    expect(sent).not.toHaveProperty('store');
  });

  it("answers as a character: its persona first, its capability as a tool, the caller's tool winning a clash", async () => {
    f.upstream.script({ text: 'Aye, what do you want?' });
    const greeting = await f.openai.responses.create({ model: character.id, input: 'Hello captain' });
    validateResponse(greeting);
    expect(greeting.model).toBe(character.id);
    expect(greeting.output_text).toBe('Aye, what do you want?');
    let sent = lastChat();
    expect(sent.model).toBe('fake-chat-1');
    expect(sent.messages[0]).toMatchObject({ role: 'system', content: expect.stringContaining('Captain Rook') });
    expect(sent.messages[0]?.content).toContain('A gruff harbour master.');
    expect(sent.messages.slice(1)).toEqual([{ role: 'user', content: 'Hello captain' }]);
    expect(sent.tools?.map((t) => t.function.name)).toEqual(['wave']);

    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: { target: 'the player' } }] });
    const waved = await f.openai.responses.create({
      model: character.id,
      input: 'Wave at me',
      tools: [
        { type: 'function', name: 'wave', description: 'caller version', parameters: { type: 'object', properties: {} }, strict: false },
        { type: 'function', name: 'jump', parameters: null, strict: null },
      ],
      tool_choice: 'auto',
    });
    validateResponse(waved);
    expect(waved.output).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: expect.any(String), name: 'wave', arguments: '{"target":"the player"}', status: 'completed' },
    ]);
    expect(waved.tools).toEqual([
      { type: 'function', name: 'wave', description: 'caller version', parameters: { type: 'object', properties: {} }, strict: false },
      { type: 'function', name: 'jump', description: null, parameters: null, strict: null },
    ]);
    sent = lastChat();
    expect(sent.tools?.map((t) => [t.function.name, t.function.description])).toEqual([
      ['wave', 'caller version'],
      ['jump', undefined],
    ]);
    expect(sent.tool_choice).toBe('auto');
  });

  it('runs a tool round through previous_response_id, keeping the persona and dropping old instructions', async () => {
    const tools = [{ type: 'function' as const, name: 'open_door', parameters: { type: 'object', properties: { door: { type: 'string' } } }, strict: false }];
    f.upstream.script({ toolCalls: [{ name: 'open_door', arguments: { door: 'north' } }] });
    const asked = await f.openai.responses.create({ model: character.id, instructions: 'Speak softly.', input: 'Open the north door', tools });
    const call = asked.output[0];
    if (call?.type !== 'function_call') throw new Error(`expected a function call, got ${JSON.stringify(asked.output)}`);

    f.upstream.script({ text: 'The door is open.' });
    const answered = await f.openai.responses.create({
      model: character.id,
      previous_response_id: asked.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"opened":true}' }],
      tools,
    });
    validateResponse(answered);
    expect(answered).toMatchObject({ previous_response_id: asked.id, instructions: null, status: 'completed' });
    expect(answered.output_text).toBe('The door is open.');
    const sent = lastChat();
    expect(sent.messages.filter((m) => m.role === 'system')).toHaveLength(1);
    expect(sent.messages[0]?.content).toContain('Captain Rook');
    expect(sent.messages.slice(1)).toEqual([
      { role: 'user', content: 'Open the north door' },
      { role: 'assistant', content: null, tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'open_door', arguments: '{"door":"north"}' } }] },
      { role: 'tool', tool_call_id: call.call_id, content: '{"opened":true}' },
    ]);

    // A third turn carries everything before it.
    f.upstream.script({ text: 'Anything else?' });
    await f.openai.responses.create({ model: character.id, previous_response_id: answered.id, input: 'Thanks' });
    expect(lastChat().messages.slice(1).map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
  });

  it('runs a tool round without storage by sending the items back', async () => {
    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: { target: 'you' } }] });
    const first = await f.openai.responses.create({ model: character.id, input: 'Wave', store: false });
    validateResponse(first);
    expect(first).toMatchObject({ store: false });
    expect((await f.api.get(`/v1/responses/${first.id}`)).status).toBe(404);
    const call = first.output[0];
    if (call?.type !== 'function_call') throw new Error('expected a function call');

    f.upstream.script({ text: 'Done waving.' });
    const second = await f.openai.responses.create({
      model: character.id,
      store: false,
      input: [{ role: 'user', content: 'Wave' }, ...(first.output as OpenAI.Responses.ResponseInputItem[]), { type: 'function_call_output', call_id: call.call_id, output: 'waved' }],
    });
    validateResponse(second);
    expect(second.output_text).toBe('Done waving.');
    expect(lastChat().messages.slice(1)).toEqual([
      { role: 'user', content: 'Wave' },
      { role: 'assistant', content: null, tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'wave', arguments: '{"target":"you"}' } }] },
      { role: 'tool', tool_call_id: call.call_id, content: 'waved' },
    ]);
    const followUp = await post({ model: character.id, previous_response_id: second.id, input: 'x' });
    expect(followUp.res.status).toBe(404);
    expect(JSON.parse(followUp.text).error).toMatchObject({ param: 'previous_response_id', code: 'previous_response_not_found' });
  });

  it('passes text.format as response_format and max_output_tokens as the token limit', async () => {
    const schema = { type: 'object', properties: { mood: { type: 'string' } }, required: ['mood'], additionalProperties: false };
    f.upstream.script({ text: '{"mood":"grumpy"}' });
    const structured = await f.openai.responses.create({
      model: character.id,
      input: 'How do you feel?',
      text: { format: { type: 'json_schema', name: 'mood', schema, strict: true } },
    });
    validateResponse(structured);
    expect(structured.text?.format).toEqual({ type: 'json_schema', name: 'mood', schema, strict: true });
    expect(lastChat().response_format).toEqual({ type: 'json_schema', json_schema: { name: 'mood', schema, strict: true } });

    await f.openai.responses.create({ model: 'fake-chat-1', input: 'JSON please', text: { format: { type: 'json_object' } } });
    expect(lastChat().response_format).toEqual({ type: 'json_object' });

    const long = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
    f.upstream.script({ text: long });
    const cut = await f.openai.responses.create({ model: 'fake-chat-1', input: 'Talk', max_output_tokens: 16 });
    validateResponse(cut);
    expect(lastChat().max_tokens).toBe(16);
    expect(cut).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, max_output_tokens: 16 });
    expect(cut.output_text.split(' ')).toHaveLength(16);
  });

  it('accepts what OpenAI clients send besides, and item shapes they replay', async () => {
    f.upstream.script({ text: 'Accepted.' });
    const body = {
      model: 'fake-chat-1',
      input: [
        { role: 'system', content: 'Be kind.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Wave?' }] },
        { type: 'reasoning', id: 'rs_1', summary: [] },
        { type: 'message', id: 'msg_old', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Let me.', annotations: [], logprobs: [] }] },
        { type: 'function_call', id: 'fc_old', call_id: 'call_old', name: 'wave', arguments: '{}', status: 'completed' },
        { type: 'function_call_output', call_id: 'call_old', output: [{ type: 'input_text', text: 'ok' }] },
      ],
      tools: [{ type: 'function', name: 'wave', description: null, parameters: { type: 'object', properties: {} }, strict: true }],
      tool_choice: { type: 'function', name: 'wave' },
      include: ['message.output_text.logprobs'],
      truncation: 'disabled',
      reasoning: { effort: 'low', summary: null },
      service_tier: 'auto',
      prompt_cache_key: 'cache-1',
      prompt_cache_retention: '24h',
      safety_identifier: 'player-hash',
      background: false,
      store: true,
      stream: false,
      parallel_tool_calls: true,
      max_tool_calls: null,
      top_logprobs: 0,
      text: { format: { type: 'text' }, verbosity: 'low' },
      stream_options: null,
      context_management: null,
      conversation: null,
      prompt: null,
    };
    validateResponseCreateRequest(body);
    const { res, text } = await post(body);
    expect(res.status).toBe(200);
    const response = JSON.parse(text);
    validateResponse(response);
    expect(response).toMatchObject({ service_tier: 'auto', reasoning: { effort: 'low' }, text: { format: { type: 'text' }, verbosity: 'low' } });
    const sent = lastChat();
    expect(sent.messages).toEqual([
      { role: 'system', content: 'Be kind.' },
      { role: 'user', content: [{ type: 'text', text: 'Wave?' }] },
      { role: 'assistant', content: 'Let me.', tool_calls: [{ id: 'call_old', type: 'function', function: { name: 'wave', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_old', content: 'ok' },
    ]);
    expect(sent).toMatchObject({
      tool_choice: { type: 'function', function: { name: 'wave' } },
      parallel_tool_calls: true,
      reasoning_effort: 'low',
      verbosity: 'low',
      service_tier: 'auto',
      prompt_cache_key: 'cache-1',
      safety_identifier: 'player-hash',
    });

    // An item_reference names an item of a stored response.
    f.upstream.script({ text: 'Referenced.' });
    await f.openai.responses.create({ model: 'fake-chat-1', input: [{ type: 'item_reference', id: response.output[0].id }, { role: 'user', content: 'And?' }] });
    expect(lastChat().messages).toEqual([
      { role: 'assistant', content: 'Accepted.' },
      { role: 'user', content: 'And?' },
    ]);
  });

  it.each([
    [{ temperature: 3 }, 'temperature'],
    [{ top_p: 1.5 }, 'top_p'],
    [{ max_output_tokens: 0 }, 'max_output_tokens'],
    [{ input: undefined }, 'input'],
    [{ input: [] }, 'input'],
    [{ input: 5 }, 'input'],
    [{ input: [{ role: 'wizard', content: 'x' }] }, 'input[0].role'],
    [{ input: [{ role: 'user' }] }, 'input[0].content'],
    [{ input: [{ role: 'user', content: [{ type: 'input_text', text: 1 }] }] }, 'input[0].content[0].text'],
    [{ input: [{ role: 'user', content: [{ type: 'input_text', text: 'x', bold: true }] }] }, 'input[0].content[0].bold'],
    [{ input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
    [{ input: [{ type: 'web_search_call', id: 'ws_1' }] }, 'input[0].type'],
    [{ input: [{ type: 'item_reference', id: 'msg_nope' }] }, 'input[0].id'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, 'input[0].content[0].image_url'],
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ tools: [{ type: 'function', name: 'bad name' }] }, 'tools[0].name'],
    [{ tool_choice: 'sometimes' }, 'tool_choice'],
    [{ tool_choice: { type: 'function', name: 'nope' } }, 'tool_choice'],
    [{ text: { format: { type: 'yaml' } } }, 'text.format.type'],
    [{ text: { format: { type: 'json_schema', name: 'x' } } }, 'text.format.schema'],
    [{ metadata: { level: 3 } }, 'metadata.level'],
    [{ background: true }, 'background'],
    [{ conversation: 'conv_1' }, 'conversation'],
    [{ model: undefined }, 'model'],
    [{ temperatur: 1 }, 'temperatur'],
  ])('rejects %j with 400 naming %s', async (patch, param) => {
    const before = f.upstream.requests.length;
    const { res, text } = await post({ model: character.id, input: 'hi', ...patch });
    const body = JSON.parse(text);
    expect(res.status, text).toBe(param === 'input[0].id' ? 404 : 400);
    validateErrorBody(body);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(f.upstream.requests.length).toBe(before);
  });

  it('retrieves and deletes stored responses of the project only', async () => {
    f.upstream.script({ text: 'Keep this.' });
    const created = await f.openai.responses.create({ model: character.id, input: 'Remember' });
    const stored = await f.openai.responses.retrieve(created.id);
    validateResponse(stored);
    expect(stored).toEqual(created);

    const other = await f.t.newProject();
    const foreign = await other.client.get(`/v1/responses/${created.id}`);
    expect(foreign.status).toBe(404);
    validateErrorBody(foreign.body);
    expect(foreign.body.error).toMatchObject({ type: 'invalid_request_error', code: 'response_not_found' });
    expect((await other.client.delete(`/v1/responses/${created.id}`)).status).toBe(404);
    const continued = await post({ model: 'fake-chat-1', previous_response_id: created.id, input: 'x' }, other.key);
    expect(continued.res.status).toBe(404);
    expect(JSON.parse(continued.text).error).toMatchObject({ param: 'previous_response_id', code: 'previous_response_not_found' });

    const deleted = await f.api.delete(`/v1/responses/${created.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: created.id, object: 'response.deleted', deleted: true });
    await expect(f.openai.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(f.openai.responses.delete(created.id)).rejects.toMatchObject({ status: 404 });

    f.upstream.script({ text: 'Deleted by the SDK.' });
    const again = await f.openai.responses.create({ model: 'fake-chat-1', input: 'x' });
    await f.openai.responses.delete(again.id);
    expect((await f.api.get(`/v1/responses/${again.id}`)).status).toBe(404);
    expect((await f.api.get('/v1/responses/resp_unknown')).status).toBe(404);
  });

  it('requires the project key', async () => {
    const { res, text } = await post({ model: character.id, input: 'x' }, 'sk-troupe-wrongwrongwrongwrong');
    expect(res.status).toBe(401);
    validateErrorBody(JSON.parse(text));
  });
});
