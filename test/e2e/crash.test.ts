import { describe, expect, it } from 'vitest';
import { ApiClient } from '../support/client.ts';
import { BACKENDS, HTTP_ENGINE } from '../support/env.ts';
import { startFakeUpstream } from '../support/openai/fake-upstream.ts';
import { spawnTroupe } from '../support/process.ts';
import { createStorage } from '../support/server.ts';
import { openSocket } from '../support/ws-client.ts';

describe.each(BACKENDS)('a process killed mid-reply on $kind', (backend) => {
  it('leaves a consistent history: the player message kept, no partial reply, and the conversation goes on', async () => {
    const storage = await createStorage(backend);
    const upstream = await startFakeUpstream();
    const key = 'sk-troupe-crash_test_key_000000001';
    const env = { ...storage.env, HTTP_ENGINE, TROUPE_BOOTSTRAP_KEY: key, INFERENCE_BASE_URL: upstream.url, INFERENCE_MODEL: 'fake-chat-1', INFERENCE_MAX_RETRIES: '0' };
    try {
      const first = await spawnTroupe(env);
      const api = new ApiClient(first.url, key);
      const character = await api.post('/characters', { name: 'Doomed' }).expect(201);
      const conversation = await api.post('/conversations', { characterId: character.id }).expect(201);
      const socket = await openSocket(`${first.url.replace('http', 'ws')}/conversations/${conversation.id}/ws?token=${key}`);
      await socket.next('ready');
      // The upstream sends its role chunk and one word, then holds the stream open.
      upstream.script({ text: 'I was saying something important when', stallAfterChunks: 2 });
      socket.send({ content: 'Tell me everything' });
      // The first chunk of the reply reached the client: the reply is under way.
      expect((await socket.next('chunk')).done).toBe(false);
      expect(await first.stop('SIGKILL')).toBeNull();

      const second = await spawnTroupe(env);
      try {
        const again = new ApiClient(second.url, key);
        const before = await again.get(`/conversations/${conversation.id}`).expect(200);
        expect(before.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([['player', 'Tell me everything']]);
        upstream.script({ text: 'As I was saying.' });
        const reply = await again.post(`/conversations/${conversation.id}/messages`, { content: 'Go on' }).expect(200);
        expect(reply.characterMessage.content).toBe('As I was saying.');
        const after = await again.get(`/conversations/${conversation.id}`).expect(200);
        expect(after.messages.map((m: { role: string }) => m.role)).toEqual(['player', 'player', 'character']);
      } finally {
        await second.stop();
      }
    } finally {
      await upstream.close();
      await storage.dispose();
    }
  });
});
