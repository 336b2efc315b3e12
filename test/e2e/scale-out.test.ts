import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient } from '../support/client.ts';
import { createTempDatabase } from '../support/databases.ts';
import { HTTP_ENGINE, POSTGRES_URL, REDIS_URL } from '../support/env.ts';
import { GameClient } from '../support/game-client.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/openai/fake-upstream.ts';
import { spawnTroupe, type TroupeProcess } from '../support/process.ts';
import { openSocket, type TestSocket } from '../support/ws-client.ts';

/**
 * Two real Troupe processes sharing PostgreSQL and Redis (Colyseus' Redis presence and driver).
 * PGlite is one process's embedded database, so this suite needs a PostgreSQL server; CI sets
 * DATABASE_URL and REDIS_URL.
 */
describe.skipIf(!POSTGRES_URL || !REDIS_URL)('two processes on PostgreSQL and Redis', () => {
  const key = 'sk-troupe-scale_out_test_key_00001';
  let upstream: FakeUpstream;
  let drop: () => Promise<void>;
  let a: TroupeProcess;
  let b: TroupeProcess;
  let apiA: ApiClient;
  let apiB: ApiClient;
  let character: { id: string };

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    const db = await createTempDatabase(POSTGRES_URL as string);
    drop = db.drop;
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL: REDIS_URL as string,
      HTTP_ENGINE,
      TROUPE_BOOTSTRAP_KEY: key,
      INFERENCE_BASE_URL: upstream.url,
      INFERENCE_MODEL: 'fake-chat-1',
      INFERENCE_MAX_RETRIES: '0',
      CAPABILITY_RESULT_TIMEOUT_MS: '5000',
    };
    [a, b] = await Promise.all([spawnTroupe(env), spawnTroupe(env)]);
    apiA = new ApiClient(a.url, key);
    apiB = new ApiClient(b.url, key);
    const ask = await apiA.post('/capabilities', { name: 'ask_item', type: 'client_function_call', parameters: [{ name: 'item', type: 'string', required: true }] }).expect(201);
    character = await apiA.post('/characters', { name: 'Ferryman', capabilityGroupIds: [ask.id] }).expect(201);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await upstream?.close();
    await drop?.();
  });

  const socketOn = async (server: TroupeProcess, id: string): Promise<TestSocket> => {
    const socket = await openSocket(`${server.url.replace('http', 'ws')}/conversations/${id}/ws?token=${key}`);
    expect(await socket.next()).toEqual({ type: 'ready' });
    return socket;
  };

  /** Every event up to and including the reply's `done` chunk. */
  const eventsOfOneReply = async (socket: TestSocket) => {
    const events: Record<string, unknown>[] = [];
    for (;;) {
      const event = await socket.next();
      events.push(event);
      if (event.type === 'chunk' && event.done === true) return events;
    }
  };

  it('a message posted on A reaches a socket on B exactly once, in order', async () => {
    const conversation = await apiA.post('/conversations', { characterId: character.id }).expect(201);
    const socket = await socketOn(b, conversation.id);
    const replies = ['First answer, in five words.', 'Second answer follows here.', 'Third and last answer.'];
    for (const [i, text] of replies.entries()) {
      upstream.script({ text });
      const posted = await apiA.post(`/conversations/${conversation.id}/messages`, { content: `Question ${i + 1}` }).expect(200);
      expect(posted.characterMessage.content).toBe(text);
      const events = await eventsOfOneReply(socket);
      // Only this reply's chunks, each once: they rebuild the text exactly, with one `done`.
      expect(events.every((e) => e.type === 'chunk' && e.characterId === character.id)).toBe(true);
      expect(events.filter((e) => e.done === true)).toHaveLength(1);
      expect(events.map((e) => e.content).join('')).toBe(text);
    }
    const history = await apiB.get(`/conversations/${conversation.id}`).expect(200);
    expect(history.messages.map((m: { content: string }) => m.content)).toEqual(replies.flatMap((text, i) => [`Question ${i + 1}`, text]));
    await socket.close();
  });

  it('a socket on B talks to the actor on A, capability results included', async () => {
    const conversation = await apiA.post('/conversations', { characterId: character.id }).expect(201);
    upstream.script({ text: 'Noted.' });
    await apiA.post(`/conversations/${conversation.id}/messages`, { content: 'Start here' }).expect(200); // the actor now runs on A
    const onA = await socketOn(a, conversation.id);
    const onB = await socketOn(b, conversation.id);
    upstream.script({ toolCalls: [{ name: 'ask_item', arguments: { item: 'coin' } }] }, { text: 'The fare is paid.' });
    onB.send({ content: 'Take me across' });
    const call = await onB.next('capability');
    expect(call).toMatchObject({ name: 'ask_item', params: { item: 'coin' } });
    onB.send({ type: 'capability_result', callId: call.callId, result: { paid: 1 } });
    expect(await onB.reply()).toBe('The fare is paid.');
    // The socket on A saw the same stream.
    expect(await onA.next('capability')).toEqual(call);
    expect(await onA.reply()).toBe('The fare is paid.');
    const chat = upstream.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)?.body as { messages: { content: string }[] };
    expect(JSON.parse(chat.messages.at(-1)?.content ?? 'null')).toEqual({ paid: 1 });
    await onA.close();
    await onB.close();
  });

  it('a Colyseus client matchmaking on B plays in the room on A', async () => {
    const conversation = await apiA.post('/conversations', { characterId: character.id }).expect(201);
    upstream.script({ text: 'Aboard.' });
    await apiA.post(`/conversations/${conversation.id}/messages`, { content: 'Hello' }).expect(200);
    const game = await GameClient.join(b.url, key, conversation.id);
    // Joined: the seat reservation sent the client to A, where the actor lives (a seat
    // reserved on A cannot be taken on B).
    expect(game.state.messages.map((m) => m.content)).toEqual(['Hello', 'Aboard.']);
    upstream.script({ text: 'We sail at dawn.' });
    await apiB.post(`/conversations/${conversation.id}/messages`, { content: 'When?' }).expect(200);
    expect(await game.reply()).toBe('We sail at dawn.');
    await game.until((s) => s.messages.length === 4);
    await game.leave();
  });

  it("a room's lines posted on A, its actor on B and a socket on A: every line exactly once, in order", async () => {
    const room = await apiA.post('/v1/rooms', { name: 'Ferry deck' }).expect(201);
    await apiA.post(`/v1/rooms/${room.id as string}/participants`, { characterId: character.id }).expect(201);
    upstream.script({ text: 'Welcome aboard.' });
    // The first line goes through B, so B makes the room's actor.
    await apiB.post(`/v1/rooms/${room.id as string}/messages`, { content: 'Ferryman, hello', speakerName: 'Ana' }).expect(202);
    const lines = ['Ferryman, how far?', 'Ferryman, how long?', 'Ferryman, how much?'];
    const answers = ['An hour across.', 'Until the bell.', 'One coin.'];
    upstream.script(...answers.map((text) => ({ text })));
    // The first exchange ends on the actor before the socket starts counting.
    while ((((await apiA.get(`/v1/rooms/${room.id as string}/transcript`).expect(200)) as unknown[]).length) < 2);
    const socket = await openSocket(`${a.url.replace('http', 'ws')}/v1/rooms/${room.id as string}/ws?token=${key}`);
    expect(await socket.next()).toEqual({ type: 'ready' });
    for (const content of lines) await apiA.post(`/v1/rooms/${room.id as string}/messages`, { content, speakerName: 'Ana' }).expect(202);
    const heard: string[] = [];
    while (heard.length < 6) {
      const event = await socket.next();
      if (event.type === 'transcript') heard.push((event.entry as { content: string }).content);
    }
    expect(heard).toEqual([lines[0], answers[0], lines[1], answers[1], lines[2], answers[2]]);
    const transcript = (await apiB.get(`/v1/rooms/${room.id as string}/transcript`).expect(200)) as { content: string }[];
    expect(transcript.map((e) => e.content)).toEqual(['Ferryman, hello', 'Welcome aboard.', ...heard]);
    // A game client matchmaking on A plays in the room on B.
    const game = await GameClient.join(a.url, key, room.id as string);
    expect(((game.state as unknown as { transcript: unknown[] }).transcript).length).toBe(8);
    await game.leave();
    await socket.close();
  });
});
