import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';

describe.each(BACKENDS)('POST /perform on $kind', (backend) => {
  let f: V1Fixture;
  let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let npc: { id: string };

  beforeAll(async () => {
    f = await startV1Fixture(backend, { WEBHOOK_ALLOW_PRIVATE: 'true' });
    hooks = await startWebhookReceiver(() => '');
    const attack = await f.api.post('/capabilities', { name: 'attack', type: 'client_function_fire', parameters: [{ name: 'target', type: 'string', required: true }] }).expect(201);
    const trade = await f.api.post('/capabilities', { name: 'trade', type: 'client_function_call', parameters: [{ name: 'item', type: 'string' }] }).expect(201);
    const alarm = await f.api
      .post('/capabilities', { name: 'alarm', type: 'server_function_fire', parameters: [], webhookUrl: `${hooks.url}/alarm` })
      .expect(201);
    npc = await f.api.post('/characters', { name: 'Guard', description: 'A city guard.', capabilityGroupIds: [attack.id, trade.id, alarm.id] }).expect(201);
  });
  afterAll(async () => {
    await f.close();
    await hooks.close();
  });

  it('answers text actions from the history, with player/npc roles mapped', async () => {
    f.upstream.script({ text: 'Move along, citizen.' });
    const actions = await f.api
      .post('/perform', { npcId: npc.id, history: [{ role: 'player', content: 'Hi' }, { role: 'npc', content: 'State your business.' }, { role: 'player', content: 'Just passing' }] })
      .expect(200);
    expect(actions).toEqual([{ type: 'text', content: 'Move along, citizen.' }]);
    const sent = f.upstream.requests.at(-1)?.body as { messages: { role: string; content: string }[] };
    expect(sent.messages.slice(1)).toEqual([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'State your business.' },
      { role: 'user', content: 'Just passing' },
    ]);
  });

  it('returns client capabilities as function actions in order, and runs server ones through their webhook', async () => {
    const webhook = hooks.next();
    f.upstream.script(
      { text: 'Thief!', toolCalls: [{ name: 'alarm', arguments: {} }, { name: 'attack', arguments: { target: 'player' } }] },
      { text: 'Or pay me.', toolCalls: [{ name: 'trade', arguments: { item: 'gold' } }] },
    );
    const actions = await f.api.post('/perform', { npcId: npc.id, history: [{ role: 'player', content: 'I stole it' }] }).expect(200);
    expect(actions).toEqual([
      { type: 'text', content: 'Thief!' },
      { type: 'function', name: 'attack', input: { target: 'player' } },
      { type: 'text', content: 'Or pay me.' },
      { type: 'function', name: 'trade', input: { item: 'gold' } },
    ]);
    expect((await webhook).body).toMatchObject({ capability: { name: 'alarm' }, conversationId: null });
  });

  it('cancels the upstream call when the game leaves before the decision', async () => {
    f.upstream.script({ text: 'Halt, who goes there?', stallAfterChunks: 1 });
    const controller = new AbortController();
    const request = fetch(`${f.t.url}/perform`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ npcId: npc.id, history: [{ role: 'player', content: 'Psst' }] }),
      signal: controller.signal,
    }).catch((err: unknown) => err);
    const aborted = f.upstream.nextAbort();
    // Earlier tests' requests come first: wait for this one to reach the upstream.
    while (!JSON.stringify((await f.upstream.nextRequest()).body).includes('Psst'));
    controller.abort();
    expect(await request).toBeInstanceOf(Error);
    expect(await (await aborted).settled).toBe('aborted');
  });

  it('validates its input and needs credentials', async () => {
    expect((await f.api.post('/perform', { npcId: 'character_nope', history: [] }).expect(404)).error).toMatchObject({ param: 'npcId', code: 'npc_not_found' });
    expect((await f.api.post('/perform', { history: [] }).expect(400)).error.param).toBe('npcId');
    expect((await f.api.post('/perform', { npcId: npc.id, history: [{ role: 'narrator', content: 'x' }] }).expect(400)).error.param).toBe('history[0].role');
    await f.t.client(null).post('/perform', { npcId: npc.id, history: [] }).expect(401);
  });
});
