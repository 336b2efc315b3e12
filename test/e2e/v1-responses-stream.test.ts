import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { validateErrorBody, validateResponse, validateResponseStreamEvent } from '../support/openai/conformance.ts';
import { parseEvents, useResponsesFixture } from '../support/responses.ts';

describe.each(BACKENDS)('/v1/responses streaming on $kind', (backend) => {
  const { f, character, chats, lastChat, post, streamEvents } = useResponsesFixture(backend);

  it('streams a message in event order, ending with response.completed, the response stored', async () => {
    f.upstream.script({ text: 'Welcome aboard, sailor.' });
    const events = await streamEvents({ model: character.id, input: 'Hi' });
    const types = events.map((e) => e.type);
    expect(types.slice(0, 5)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.delta']);
    expect(types.slice(-5)).toEqual(['response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    expect(new Set(types.slice(4, -4))).toEqual(new Set(['response.output_text.delta']));
    const created = events[0]?.response as OpenAI.Responses.Response;
    expect(created).toMatchObject({ status: 'in_progress', output: [], model: character.id });
    const deltas = events.filter((e) => e.type === 'response.output_text.delta');
    expect(deltas.map((e) => e.delta).join('')).toBe('Welcome aboard, sailor.');
    expect(events.find((e) => e.type === 'response.output_text.done')?.text).toBe('Welcome aboard, sailor.');
    const completed = events.at(-1)?.response as OpenAI.Responses.Response;
    expect(completed).toMatchObject({ id: created.id, status: 'completed', usage: { output_tokens: 3 } });
    expect(completed.output).toEqual([events.at(-2)?.item]);
    expect(lastChat()).toMatchObject({ stream: true, stream_options: { include_usage: true } });

    const stored = await f.openai.responses.retrieve(created.id);
    validateResponse(stored);
    expect(stored).toEqual({ ...completed, output_text: 'Welcome aboard, sailor.' });
  });

  it('streams a function call as argument deltas, and through the SDK', async () => {
    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: { target: 'the crew' } }] });
    const events = await streamEvents({ model: character.id, input: 'Wave at the crew' });
    expect(events.map((e) => e.type).filter((t, i, all) => t !== all[i - 1])).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const args = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta);
    expect(args.length).toBeGreaterThan(1);
    expect(JSON.parse(args.join(''))).toEqual({ target: 'the crew' });
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    expect(done).toMatchObject({ name: 'wave', arguments: args.join('') });
    expect((events.at(-1)?.response as OpenAI.Responses.Response).output).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: expect.any(String), name: 'wave', arguments: args.join(''), status: 'completed' },
    ]);

    f.upstream.script({ text: 'Ahoy.' });
    const stream = await f.openai.responses.create({ model: character.id, input: 'Greet', stream: true });
    let text = '';
    for await (const event of stream) {
      validateResponseStreamEvent(event);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(text).toBe('Ahoy.');
    f.upstream.script({ text: 'Fair winds.' });
    const final = await f.openai.responses.stream({ model: character.id, input: 'Bye' }).finalResponse();
    expect(final.output_text).toBe('Fair winds.');
  });

  it('streams text and several calls as items one after another, and replays them as one assistant turn', async () => {
    f.upstream.script({ text: 'Aye.', toolCalls: [{ name: 'wave', arguments: { target: 'Ann' } }, { name: 'wave', arguments: { target: 'Bo' } }] });
    const events = await streamEvents({ model: character.id, input: 'Wave at Ann and Bo' });
    const item = ['response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done'];
    expect(events.map((e) => e.type).filter((t, i, all) => t !== all[i - 1])).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      ...item,
      ...item,
      'response.completed',
    ]);
    const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.output_index);
    expect(done).toEqual([0, 1, 2]);
    const response = events.at(-1)?.response as OpenAI.Responses.Response;
    expect(response.output.map((o) => o.type)).toEqual(['message', 'function_call', 'function_call']);
    const calls = response.output.filter((o) => o.type === 'function_call');

    f.upstream.script({ text: 'Both waved at.' });
    await f.openai.responses.create({
      model: character.id,
      previous_response_id: response.id,
      input: calls.map((call) => ({ type: 'function_call_output' as const, call_id: call.call_id, output: 'ok' })),
    });
    const sent = lastChat().messages.slice(1);
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool']);
    expect(sent[1]).toMatchObject({ content: 'Aye.', tool_calls: calls.map((call) => ({ id: call.call_id, function: { name: 'wave', arguments: call.arguments } })) });
  });

  it('ends with an error event and response.failed when the upstream fails mid-stream', async () => {
    f.upstream.script({ text: 'one two three four five six', stallAfterChunks: 3 });
    const res = await fetch(`${f.t.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: character.id, input: 'Count', stream: true }),
    });
    expect(res.status).toBe(200);
    const upstreamRequest = chats().at(-1);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let raw = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      raw += decoder.decode(r.value, { stream: true });
      if (raw.includes('event: response.output_text.delta\n')) upstreamRequest?.breakOff();
    }
    const events = parseEvents(raw);
    for (const event of events) validateResponseStreamEvent(event);
    expect(events.map((e) => e.type).slice(-2)).toEqual(['error', 'response.failed']);
    expect(events.at(-2)).toMatchObject({ code: expect.any(String), message: expect.any(String), param: null });
    const failed = events.at(-1)?.response as OpenAI.Responses.Response;
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'server_error', message: expect.any(String) } });
    expect(failed.output[0]).toMatchObject({ type: 'message', status: 'incomplete' });
    // Stored as it ended.
    expect((await f.openai.responses.retrieve(failed.id)).status).toBe('failed');

    f.upstream.script({ text: 'alpha beta gamma', stallAfterChunks: 2 });
    const sdkStream = await f.openai.responses.create({ model: character.id, input: 'Again', stream: true });
    const broken = chats().at(-1);
    const consumed = (async () => {
      for await (const event of sdkStream) if (event.type === 'response.output_text.delta') broken?.breakOff();
    })();
    await expect(consumed).rejects.toThrow();
  });

  it('aborts the upstream request when the client leaves mid-stream', async () => {
    f.upstream.script({ text: 'a b c d e f g h i j', stallAfterChunks: 2 });
    const controller = new AbortController();
    const stream = await f.openai.responses.create({ model: character.id, input: 'Talk', stream: true }, { signal: controller.signal });
    const aborted = f.upstream.nextAbort();
    for await (const _event of stream) {
      controller.abort();
      break;
    }
    const request = await aborted;
    expect(request.path).toBe('/v1/chat/completions');
    expect(await request.settled).toBe('aborted');
  });

  it('answers an HTTP 502 when the upstream fails before the first byte, streaming or not', async () => {
    for (const stream of [false, true]) {
      f.upstream.script({ error: { status: 503, type: 'server_error', message: 'overloaded' } });
      const { res, text } = await post({ model: character.id, input: 'x', stream });
      expect(res.status).toBe(502);
      expect(res.headers.get('content-type')).toContain('application/json');
      validateErrorBody(JSON.parse(text));
    }
  });
});
