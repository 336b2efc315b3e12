import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket } from '../support/ws-client.ts';

type UpstreamBody = { messages: { role: string; content: string }[]; tools?: unknown[] };

describe.each(BACKENDS)('conversation WebSocket on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string };
  let wsBase: string;

  beforeAll(async () => {
    f = await startV1Fixture(backend, { CAPABILITY_RESULT_TIMEOUT_MS: '400' });
    const ask = await f.api.post('/capabilities', { name: 'ask_item', type: 'client_function_call', parameters: [{ name: 'item', type: 'string', required: true }] }).expect(201);
    const wave = await f.api.post('/capabilities', { name: 'wave', type: 'client_function_fire', parameters: [] }).expect(201);
    character = await f.api.post('/characters', { name: 'Innkeeper', capabilityGroupIds: [ask.id, wave.id] }).expect(201);
    wsBase = f.t.url.replace('http://', 'ws://');
  });
  afterAll(() => f.close());

  const start = async () => (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id as string;
  const socketUrl = (id: string, token = f.key) => `${wsBase}/conversations/${id}/ws?token=${encodeURIComponent(token)}`;
  const lastChat = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)?.body as UpstreamBody;

  it('refuses a bad token or a foreign conversation before the upgrade', async () => {
    const id = await start();
    await expect(openSocket(socketUrl(id, 'sk-troupe-notavalidkeynotavalidkey'))).rejects.toThrow('HTTP 401');
    await expect(openSocket(`${wsBase}/conversations/${id}/ws`)).rejects.toThrow('HTTP 401');
    const other = await f.t.newProject('stranger');
    await expect(openSocket(socketUrl(id, other.key))).rejects.toThrow('HTTP 404');
    await expect(openSocket(socketUrl('conv_missing'))).rejects.toThrow('HTTP 404');
    // A plain GET on the socket path says how to connect.
    expect((await f.api.get(`/conversations/${id}/ws`).expect(426)).error.code).toBe('upgrade_required');
  });

  it('sends ready, streams the reply in chunks ending with done, and stores both messages', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    expect(await socket.next()).toEqual({ type: 'ready' });
    f.upstream.script({ text: 'A room costs two silver.' });
    socket.send({ content: 'A room please', mode: 'conversation' });
    const chunks: Record<string, unknown>[] = [];
    for (;;) {
      const event = await socket.next('chunk');
      chunks.push(event);
      if (event.done) break;
    }
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.every((c) => c.characterId === character.id)).toBe(true);
    expect(chunks.slice(0, -1).every((c) => c.done === false)).toBe(true);
    expect(chunks.map((c) => c.content).join('')).toBe('A room costs two silver.');
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { content: string }) => m.content)).toEqual(['A room please', 'A room costs two silver.']);
    await socket.close();
  });

  it('handles messages of one socket strictly in the order they were sent', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    await socket.next('ready');
    const contents = ['first', 'second', 'third', 'fourth'];
    for (const content of contents) socket.send({ content });
    // The fake upstream echoes the last user message: replies come back in the same order.
    const replies = [];
    for (let i = 0; i < contents.length; i++) replies.push(await socket.reply());
    expect(replies).toEqual(contents);
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { content: string }) => m.content)).toEqual(contents.flatMap((c) => [c, c]));
    await socket.close();
  });

  it('gives every socket of a conversation the same stream, also for messages sent over HTTP', async () => {
    const id = await start();
    const a = await openSocket(socketUrl(id));
    const b = await openSocket(socketUrl(id));
    await a.next('ready');
    await b.next('ready');
    f.upstream.script({ text: 'Both of you, listen.' });
    const [ra, rb] = await Promise.all([a.reply(), b.reply(), f.api.post(`/conversations/${id}/messages`, { content: 'hey' }).expect(200)]);
    expect(ra).toBe('Both of you, listen.');
    expect(rb).toBe('Both of you, listen.');
    await Promise.all([a.close(), b.close()]);
  });

  it('stores a message resent with the same idempotencyKey once, and answers its failed reply on the retry', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    await socket.next('ready');
    f.upstream.script({ error: { status: 500, type: 'server_error', message: 'model crashed' } });
    socket.send({ content: 'Any rooms?', idempotencyKey: 'k-1' });
    expect(await socket.next('error')).toMatchObject({ type: 'error', replyId: expect.stringMatching(/^reply_/) });
    f.upstream.script({ text: 'One left.' });
    socket.send({ content: 'Any rooms?', idempotencyKey: 'k-1' });
    expect(await socket.reply()).toBe('One left.');
    socket.send({ content: 'Any rooms?', idempotencyKey: 'bad key' });
    expect(await socket.next('error')).toMatchObject({ code: 'invalid_parameter', param: 'idempotencyKey' });
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { content: string }) => m.content)).toEqual(['Any rooms?', 'One left.']);
    await socket.close();
  });

  it('answers bad input with an error event and keeps the socket open', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    await socket.next('ready');
    socket.send('not json at all');
    expect((await socket.next()).type).toBe('error');
    socket.send({ mode: 'conversation' });
    expect(String((await socket.next('error')).message)).toContain("'content'");
    socket.send({ content: 'hi', mode: 'poetry' });
    expect(String((await socket.next('error')).message)).toContain("'mode'");
    socket.send({ type: 'capability_result', callId: 'call_unknown', result: 1 });
    expect(String((await socket.next('error')).message)).toContain('call_unknown');
    f.upstream.script({ text: 'Still here.' });
    socket.send({ content: 'hello?' });
    expect(await socket.reply()).toBe('Still here.');
    await socket.close();
  });

  it('client_function_call: the capability event carries a callId and the result feeds the next round', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    await socket.next('ready');
    f.upstream.script({ toolCalls: [{ name: 'ask_item', arguments: { item: 'coin' } }] }, { text: 'Thank you kindly.' });
    socket.send({ content: 'Here you go' });
    const call = await socket.next('capability');
    expect(call).toEqual({ type: 'capability', characterId: character.id, name: 'ask_item', params: { item: 'coin' }, callId: expect.any(String), replyId: expect.stringMatching(/^reply_/) });
    socket.send({ type: 'capability_result', callId: call.callId, result: { given: 'coin', amount: 2 } });
    expect(await socket.reply()).toBe('Thank you kindly.');
    expect(JSON.parse(lastChat().messages.at(-1)?.content ?? 'null')).toEqual({ given: 'coin', amount: 2 });
    await socket.close();
  });

  it('client_function_call: without an answer the character continues after the timeout and says so', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    await socket.next('ready');
    f.upstream.script({ toolCalls: [{ name: 'ask_item', arguments: { item: 'map' } }] }, { text: 'Never mind then.' });
    socket.send({ content: 'What now?' });
    await socket.next('capability');
    expect(await socket.reply()).toBe('Never mind then.');
    expect(lastChat().messages.at(-1)?.content).toContain('did not answer within 400 ms');
    await socket.close();
  });

  it('client_function_fire: delivered as a capability event while the reply goes on', async () => {
    const id = await start();
    const socket = await openSocket(socketUrl(id));
    await socket.next('ready');
    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: {} }] }, { text: 'Hello there!' });
    socket.send({ content: 'Hi' });
    expect(await socket.next('capability')).toMatchObject({ name: 'wave', params: {} });
    expect(await socket.reply()).toBe('Hello there!');
    await socket.close();
  });

  it('mode analysis: an out-of-character answer streamed to the asker only, never stored', async () => {
    const id = await start();
    f.upstream.script({ text: 'Welcome, traveller.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'Hello' }).expect(200);
    const asker = await openSocket(socketUrl(id));
    const bystander = await openSocket(socketUrl(id));
    await asker.next('ready');
    await bystander.next('ready');
    f.upstream.script({ text: 'The innkeeper stays in character and is friendly.' });
    asker.send({ content: 'Is the innkeeper consistent?', mode: 'analysis' });
    expect(await asker.reply()).toBe('The innkeeper stays in character and is friendly.');
    const sent = lastChat();
    expect(sent.messages[0]?.content).toContain('narrative designer');
    expect(sent.messages[0]?.content).toContain('Player: Hello');
    expect(sent.tools).toBeUndefined();
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages).toHaveLength(2);
    // The bystander saw nothing of it: its next event is the next real reply.
    f.upstream.script({ text: 'Anything else?' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'No' }).expect(200);
    expect(await bystander.reply()).toBe('Anything else?');
    await Promise.all([asker.close(), bystander.close()]);
  });
});
