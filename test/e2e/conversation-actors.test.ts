import { matchMaker } from '@colyseus/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConversationActors } from '../../actors/conversation-actors.ts';
import { BACKENDS } from '../support/env.ts';
import { GameClient } from '../support/game-client.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket } from '../support/ws-client.ts';

type UpstreamBody = { messages: { role: string; content: string }[] };

describe.each(BACKENDS)('conversation actors on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string };

  beforeAll(async () => {
    f = await startV1Fixture(backend, { CONVERSATION_IDLE_MS: '200' });
    character = await f.api.post('/characters', { name: 'Archivist' }).expect(201);
  });
  afterAll(() => f.close());

  const start = async () => (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id as string;
  const roomType = () => matchMaker.getHandler((f.t.server.resources.conversationActors as ConversationActors).roomName);
  /** Resolves when the actor of conversation `id` emits `event` ('create' or 'dispose'). */
  const actorEvent = (event: 'create' | 'dispose', id: string) =>
    new Promise<void>((resolve) => {
      const handler = roomType();
      const listener = (room: { roomId: string }) => {
        if (room.roomId !== id) return;
        handler.off(event, listener);
        resolve();
      };
      handler.on(event, listener);
    });
  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body as UpstreamBody);

  it('is made on demand, disposed when idle, and rebuilt from the database', async () => {
    const id = await start();
    expect(matchMaker.getLocalRoomById(id)).toBeUndefined();
    const created = actorEvent('create', id);
    const disposed = actorEvent('dispose', id);
    f.upstream.script({ text: 'Filed under F.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'File this' }).expect(200);
    await created;
    await disposed;
    expect(matchMaker.getLocalRoomById(id)).toBeUndefined();

    // The next message makes a new actor, whose state and the model's history come from storage.
    f.upstream.script({ text: 'It is under F.' });
    await f.api.post(`/conversations/${id}/messages`, { content: 'Where is it?' }).expect(200);
    expect(chats().at(-1)?.messages.slice(1).map((m) => m.content)).toEqual(['File this', 'Filed under F.', 'Where is it?']);
    const game = await GameClient.join(f.t.url, f.key, id);
    expect(game.state.messages.map((m) => m.content)).toEqual(['File this', 'Filed under F.', 'Where is it?', 'It is under F.']);
    await game.leave();
  });

  it('stays alive while a game client is joined', async () => {
    const id = await start();
    const game = await GameClient.join(f.t.url, f.key, id);
    const disposed = actorEvent('dispose', id);
    // Longer than the idle time, measured by a reply that takes that long.
    f.upstream.script({ text: 'One moment, two moments, three.', chunkDelayMs: 100 });
    await f.api.post(`/conversations/${id}/messages`, { content: 'Wait' }).expect(200);
    f.upstream.script({ text: 'Still here.', chunkDelayMs: 100 });
    await f.api.post(`/conversations/${id}/messages`, { content: 'Still?' }).expect(200);
    expect(matchMaker.getLocalRoomById(id)).toBeDefined();
    await game.leave();
    await disposed;
    expect(matchMaker.getLocalRoomById(id)).toBeUndefined();
  });

  it('replies to messages from HTTP and the WebSocket one at a time, in arrival order', async () => {
    const id = await start();
    const socket = await openSocket(`${f.t.url.replace('http', 'ws')}/conversations/${id}/ws?token=${f.key}`);
    await socket.next('ready');
    f.upstream.script({ text: 'First, slowly.', chunkDelayMs: 30 }, { text: 'Second.' });
    const viaHttp = f.api.post(`/conversations/${id}/messages`, { content: 'One' }).expect(200);
    // The socket's message arrives while the first reply is still streaming.
    const firstChunk = String((await socket.next('chunk')).content);
    socket.send({ content: 'Two' });
    expect((await viaHttp).characterMessage.content).toBe('First, slowly.');
    expect(firstChunk + (await socket.reply())).toBe('First, slowly.');
    expect(await socket.reply()).toBe('Second.');
    // The second request saw the first exchange complete: it was queued behind it.
    expect(chats().at(-1)?.messages.slice(1).map((m) => m.content)).toEqual(['One', 'First, slowly.', 'Two']);
    const history = await f.api.get(`/conversations/${id}`).expect(200);
    expect(history.messages.map((m: { content: string }) => m.content)).toEqual(['One', 'First, slowly.', 'Two', 'Second.']);
    await socket.close();
  });
});
