import { MatchMakeError } from '@colyseus/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { GameClient } from '../support/game-client.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';

type UpstreamBody = { messages: { role: string; content: string }[] };

describe.each(BACKENDS)('Colyseus game clients on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string };

  beforeAll(async () => {
    f = await startV1Fixture(backend, { CAPABILITY_RESULT_TIMEOUT_MS: '2000' });
    const ask = await f.api.post('/capabilities', { name: 'ask_item', type: 'client_function_call', parameters: [{ name: 'item', type: 'string', required: true }] }).expect(201);
    const wave = await f.api.post('/capabilities', { name: 'wave', type: 'client_function_fire', parameters: [{ name: 'hand', type: 'string' }] }).expect(201);
    character = await f.api.post('/characters', { name: 'Innkeeper', capabilityGroupIds: [ask.id, wave.id] }).expect(201);
  });
  afterAll(() => f.close());

  const start = async () => (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id as string;
  const join = (id: string, key = f.key) => GameClient.join(f.t.url, key, id);
  const lastChat = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)?.body as UpstreamBody;

  it('joins with an API key and receives the stored history as schema state', async () => {
    const id = await start();
    f.upstream.script({ text: 'Welcome, traveller.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'Hello' }).expect(200);
    const game = await join(id);
    expect(game.state.conversationId).toBe(id);
    expect(game.state.characterId).toBe(character.id);
    expect(game.state.speaking).toBe(false);
    expect(game.state.messages.map((m) => [m.role, m.content])).toEqual([
      ['player', 'Hello'],
      ['character', 'Welcome, traveller.'],
    ]);
    await game.leave();
  });

  it('refuses a bad key and a conversation of another project', async () => {
    const id = await start();
    const bad = await join(id, 'sk-troupe-notavalidkeynotavalidkey').catch((err: unknown) => err);
    expect(bad).toBeInstanceOf(MatchMakeError);
    expect((bad as MatchMakeError).code).toBe(401);
    const other = await f.t.newProject('stranger');
    const foreign = await join(id, other.key).catch((err: unknown) => err);
    expect(foreign).toBeInstanceOf(MatchMakeError);
    expect((foreign as MatchMakeError).code).toBe(404);
  });

  it('talks to the character: chunks as room messages, messages and speaking in the state', async () => {
    const id = await start();
    const game = await join(id);
    const speaking = game.recordSpeaking();
    // Slow enough that a state patch (every 50 ms) lands while the character speaks.
    f.upstream.script({ text: 'A room costs two silver.', chunkDelayMs: 60 });
    game.send('message', { content: 'A room please' });
    await game.until((s) => s.speaking && s.partialReply.length > 0);
    expect('A room costs two silver.'.startsWith(game.state.partialReply)).toBe(true);
    expect(await game.reply()).toBe('A room costs two silver.');
    await game.until((s) => s.messages.length === 2 && !s.speaking);
    expect(game.state.messages.map((m) => m.content)).toEqual(['A room please', 'A room costs two silver.']);
    expect(speaking).toContain(true);
    expect(speaking.at(-1)).toBe(false);
    const stored = await f.api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { id: string }) => m.id)).toEqual(game.state.messages.map((m) => m.id));
    await game.leave();
  });

  it('sees messages sent over HTTP and over the conversation WebSocket', async () => {
    const id = await start();
    const game = await join(id);
    f.upstream.script({ text: 'Heard you.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'From HTTP' }).expect(200);
    expect(await game.reply()).toBe('Heard you.');
    await game.until((s) => s.messages.length === 2);
    expect(game.state.messages[0]?.content).toBe('From HTTP');
    await game.leave();
  });

  it('client_function_fire: a capability message and lastCapability in the state', async () => {
    const id = await start();
    const game = await join(id);
    f.upstream.script({ toolCalls: [{ name: 'wave', arguments: { hand: 'left' } }] }, { text: 'Hello there!' });
    game.send('message', { content: 'Hi' });
    expect(await game.next('capability')).toMatchObject({ characterId: character.id, name: 'wave', params: { hand: 'left' } });
    expect(await game.reply()).toBe('Hello there!');
    await game.until((s) => s.lastCapability?.name === 'wave');
    expect(JSON.parse(game.state.lastCapability?.params ?? 'null')).toEqual({ hand: 'left' });
    await game.leave();
  });

  it('client_function_call: the game client answers by callId and the character goes on with it', async () => {
    const id = await start();
    const game = await join(id);
    f.upstream.script({ toolCalls: [{ name: 'ask_item', arguments: { item: 'coin' } }] }, { text: 'Thank you kindly.' });
    game.send('message', { content: 'Here you go' });
    const call = await game.next('capability');
    expect(call).toMatchObject({ name: 'ask_item', params: { item: 'coin' }, callId: expect.any(String) });
    game.send('capability_result', { callId: call.callId, result: { given: 'coin' } });
    expect(await game.reply()).toBe('Thank you kindly.');
    expect(JSON.parse(lastChat().messages.at(-1)?.content ?? 'null')).toEqual({ given: 'coin' });
    await game.leave();
  });

  it('answers bad messages with an error message and stays joined', async () => {
    const id = await start();
    const game = await join(id);
    game.send('message', { mode: 'conversation' });
    expect(String((await game.next('error')).message)).toContain("Missing required parameter: 'content'");
    game.send('capability_result', { callId: 'call_unknown', result: 1 });
    expect(String((await game.next('error')).message)).toContain('call_unknown');
    f.upstream.script({ text: 'Still here.' });
    game.send('message', { content: 'Hello?' });
    expect(await game.reply()).toBe('Still here.');
    await game.leave();
  });

  it('analysis mode answers this client only and stores nothing', async () => {
    const id = await start();
    const game = await join(id);
    const other = await join(id);
    f.upstream.script({ text: 'The player is polite.' });
    game.send('message', { content: 'How is the player doing?', mode: 'analysis' });
    expect(await game.reply()).toBe('The player is polite.');
    expect((await f.api.get(`/conversations/${id}`).expect(200)).messages).toEqual([]);
    // The other client got nothing from the analysis: its next chunk belongs to the next reply.
    f.upstream.script({ text: 'Hi both.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'Hi' }).expect(200);
    expect(await other.reply()).toBe('Hi both.');
    await game.leave();
    await other.leave();
  });
});
