import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';

type UpstreamBody = { messages: { role: string; content: string; tool_call_id?: string }[]; tools?: { function: { name: string } }[] };

describe.each(BACKENDS)('conversations over HTTP on $kind', (backend) => {
  let f: V1Fixture;
  let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let secret = '';
  let character: { id: string };
  const caps: Record<string, string> = {};

  beforeAll(async () => {
    f = await startV1Fixture(backend, { WEBHOOK_ALLOW_PRIVATE: 'true' });
    hooks = await startWebhookReceiver(() => secret);
    const project = (await f.t.admin.get('/admin/projects').expect(200)).find((p: { name: string }) => p.name === 'test project');
    secret = (await f.t.admin.get(`/admin/projects/${project.id}`).expect(200)).webhookSecret;
    const define = async (name: string, type: string, extra: Record<string, unknown> = {}) =>
      (caps[name] = (await f.api.post('/capabilities', { name, type, parameters: [{ name: 'target', type: 'string', required: true }], ...extra }).expect(201)).id);
    await define('wave', 'client_function_fire');
    await define('ask_item', 'client_function_call');
    await define('open_door', 'server_function_call', { webhookUrl: `${hooks.url}/open` });
    await define('ring_bell', 'server_function_fire', { webhookUrl: `${hooks.url}/ring` });
    character = await f.api.post('/characters', { name: 'Gatekeeper', description: 'Guards the gate.', capabilityGroupIds: Object.values(caps) }).expect(201);
  });
  afterAll(async () => {
    await f.close();
    await hooks.close();
  });

  const start = async () => (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id as string;
  const chatRequests = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions');

  it('creates a conversation and retrieves it with its (empty) history', async () => {
    const created = await f.api.post('/conversations', { characterId: character.id }).expect(201);
    expect(created).toEqual({ id: expect.stringMatching(/^conv_[0-9a-z]{26}$/), createdAt: expect.any(String), characterId: character.id });
    expect(await f.api.get(`/conversations/${created.id}`).expect(200)).toEqual({ ...created, messages: [] });
    expect((await f.api.post('/conversations', { characterId: 'character_nope' }).expect(400)).error).toMatchObject({ param: 'characterId', code: 'character_not_found' });
    expect((await f.api.post('/conversations', {}).expect(400)).error.param).toBe('characterId');
    expect((await f.api.get('/conversations/conv_nope').expect(404)).error.code).toBe('conversation_not_found');
    const other = await f.t.newProject('other');
    await other.client.get(`/conversations/${created.id}`).expect(404);
    await other.client.post(`/conversations/${created.id}/messages`, { content: 'hi' }).expect(404);
    await other.client.post('/conversations', { characterId: character.id }).expect(400);
  });

  it("stores the player's message and the character's reply, in order, and uses the history", async () => {
    const id = await start();
    f.upstream.script({ text: 'Halt! Who goes there?' });
    const first = await f.api.post(`/conversations/${id}/messages`, { content: 'Hello' }).expect(200);
    expect(first).toEqual({
      playerMessage: { id: expect.stringMatching(/^msg_/), conversationId: id, role: 'player', content: 'Hello', createdAt: expect.any(String) },
      characterMessage: { id: expect.stringMatching(/^msg_/), conversationId: id, role: 'character', content: 'Halt! Who goes there?', createdAt: expect.any(String) },
      capabilityCalls: [],
      citations: [],
    });
    f.upstream.script({ text: 'Pass, friend.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'A friend' }).expect(200);
    const sent = chatRequests().at(-1)?.body as UpstreamBody;
    expect(sent.messages[0]?.role).toBe('system');
    expect(sent.messages[0]?.content).toContain('Gatekeeper');
    expect(sent.messages.slice(1)).toEqual([
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Halt! Who goes there?' },
      { role: 'user', content: 'A friend' },
    ]);
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['player', 'Hello'],
      ['character', 'Halt! Who goes there?'],
      ['player', 'A friend'],
      ['character', 'Pass, friend.'],
    ]);
  });

  it("keeps the player's message when the upstream fails, answering 502", async () => {
    const id = await start();
    f.upstream.script({ error: { status: 500, type: 'server_error', message: 'model crashed' } });
    const res = await f.api.post(`/conversations/${id}/messages`, { content: 'Are you there?' });
    expect(res.status).toBe(502);
    expect(res.body.error.type).toBe('api_error');
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([['player', 'Are you there?']]);
  });

  it('answers a retry with the same Idempotency-Key once: the message is stored once, the failed reply made, a finished one repeated', async () => {
    const id = await start();
    const send = (content: string, key: string) => f.api.post(`/conversations/${id}/messages`, { content }, { 'idempotency-key': key });
    f.upstream.script({ error: { status: 500, type: 'server_error', message: 'model crashed' } });
    expect((await send('Open the gate', 'try-1')).status).toBe(502);
    f.upstream.script({ text: 'Opening.' });
    const retried = await send('Open the gate', 'try-1').expect(200);
    expect(retried.characterMessage.content).toBe('Opening.');
    // A retry of a finished exchange gets the same messages back and calls nobody.
    const calls = chatRequests().length;
    const again = await send('Open the gate', 'try-1').expect(200);
    expect(again.playerMessage.id).toBe(retried.playerMessage.id);
    expect(again.characterMessage.id).toBe(retried.characterMessage.id);
    expect(chatRequests()).toHaveLength(calls);

    const reused = await send('Close the gate', 'try-1').expect(409);
    expect(reused.error).toMatchObject({ code: 'idempotency_key_reused', param: 'idempotencyKey' });
    for (const bad of ['', 'x'.repeat(256), 'has space', '\u00fcml\u00e4ut']) {
      const res = await send('Hi', bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param: 'Idempotency-Key' });
    }
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['player', 'Open the gate'],
      ['character', 'Opening.'],
    ]);
  });

  it('processes concurrent messages to one conversation one at a time: each reply follows its own message', async () => {
    const id = await start();
    const contents = ['one', 'two', 'three', 'four'];
    // Separate connections: the server sees them in some order, and handles them one by one.
    await Promise.all(contents.map((content) => f.api.post(`/conversations/${id}/messages`, { content }).expect(200)));
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    const lines = stored.messages.map((m: { role: string; content: string }) => `${m.role}:${m.content}`);
    // The fake upstream echoes the last user message, so each reply names the message it answered.
    const pairs = [];
    for (let i = 0; i < lines.length; i += 2) pairs.push([lines[i], lines[i + 1]]);
    expect(pairs.map(([p]) => p).sort()).toEqual(contents.map((c) => `player:${c}`).sort());
    for (const [player, reply] of pairs) expect(reply).toBe(player.replace('player:', 'character:'));
  });

  it('rejects an empty or missing content with 400 and stores nothing', async () => {
    const id = await start();
    expect((await f.api.post(`/conversations/${id}/messages`, { content: '   ' }).expect(400)).error.param).toBe('content');
    expect((await f.api.post(`/conversations/${id}/messages`, {}).expect(400)).error.param).toBe('content');
    expect((await f.api.get(`/conversations/${id}`).expect(200)).messages).toEqual([]);
  });

  it('client_function_fire: listed in capabilityCalls, and generation goes on', async () => {
    const id = await start();
    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: { target: 'player' } }] }, { text: 'Welcome!' });
    const res = await f.api.post(`/conversations/${id}/messages`, { content: 'hi' }).expect(200);
    expect(res.capabilityCalls).toEqual([{ callId: expect.any(String), name: 'wave', type: 'client_function_fire', params: { target: 'player' } }]);
    expect(res.characterMessage.content).toBe('Welcome!');
    const round2 = chatRequests().at(-1)?.body as UpstreamBody;
    expect(round2.messages.at(-1)).toMatchObject({ role: 'tool' });
  });

  it('client_function_call over HTTP: returned to the caller, and generation stops', async () => {
    const id = await start();
    const before = chatRequests().length;
    f.upstream.script({ text: 'Let me see.', toolCalls: [{ name: 'ask_item', arguments: { target: 'key' } }] });
    const res = await f.api.post(`/conversations/${id}/messages`, { content: 'Can I pass?' }).expect(200);
    expect(res.capabilityCalls).toEqual([{ callId: expect.any(String), name: 'ask_item', type: 'client_function_call', params: { target: 'key' } }]);
    expect(res.characterMessage.content).toBe('Let me see.');
    expect(chatRequests().length).toBe(before + 1);
  });

  it('server_function_call: Troupe POSTs a signed webhook and feeds its JSON back to the model', async () => {
    const id = await start();
    hooks.reply('/open', 200, { opened: true, gate: 'north' });
    f.upstream.script({ toolCalls: [{ name: 'open_door', arguments: { target: 'north gate' } }] }, { text: 'The gate is open.' });
    const webhook = hooks.next();
    const res = await f.api.post(`/conversations/${id}/messages`, { content: 'Open up' }).expect(200);
    const received = await webhook;
    expect(received.signatureValid).toBe(true);
    expect(received.body).toMatchObject({
      type: 'capability_call',
      characterId: character.id,
      conversationId: id,
      capability: { name: 'open_door', type: 'server_function_call' },
      arguments: { target: 'north gate' },
    });
    expect(res.capabilityCalls[0]).toMatchObject({ name: 'open_door', result: { opened: true, gate: 'north' } });
    expect(res.characterMessage.content).toBe('The gate is open.');
    const round2 = chatRequests().at(-1)?.body as UpstreamBody;
    expect(JSON.parse(round2.messages.at(-1)?.content ?? 'null')).toEqual({ opened: true, gate: 'north' });
  });

  it('server_function_fire: delivered without waiting; invalid arguments are never delivered', async () => {
    const id = await start();
    const webhook = hooks.next();
    f.upstream.script({ toolCalls: [{ name: 'ring_bell', arguments: { target: 'tower' } }] }, { text: 'Ding.' });
    const res = await f.api.post(`/conversations/${id}/messages`, { content: 'Ring it' }).expect(200);
    expect(res.capabilityCalls[0]).toMatchObject({ name: 'ring_bell', type: 'server_function_fire' });
    expect((await webhook).body).toMatchObject({ capability: { name: 'ring_bell' }, arguments: { target: 'tower' } });

    const delivered = hooks.received.length;
    f.upstream.script({ toolCalls: [{ name: 'open_door', arguments: { target: 5 } }] }, { text: 'Hmm.' });
    const bad = await f.api.post(`/conversations/${id}/messages`, { content: 'Open' }).expect(200);
    expect(bad.capabilityCalls).toEqual([]);
    expect(hooks.received.length).toBe(delivered);
    const round2 = chatRequests().at(-1)?.body as UpstreamBody;
    expect(round2.messages.at(-1)?.content).toContain("parameter 'target' must be a string");
  });
});
