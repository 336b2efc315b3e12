// The room's director, driven as text turns through agents-js's own test helpers
// (`session.run({userInput}).wait()` and `result.expect`), with the room in the LLM seat
// (test/support/room-llm.ts): what a LiveKit Agents session sees of who answers.
import { voice } from '@livekit/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initAgentsLogger } from '../../src/voice/character-voice.ts';
import { BACKENDS } from '../support/env.ts';
import { RoomLLM } from '../support/room-llm.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';

type Chat = { messages: { role: string; content: string }[] };
const isDirectorCall = (body: Chat) => /You (direct|are the director)/.test(body.messages[0]?.content ?? '');

describe.each(BACKENDS)('the room director through agents-js test helpers on $kind', (backend) => {
  let f: V1Fixture;
  let session: voice.AgentSession;
  let mira: { id: string };
  let rook: { id: string };

  beforeAll(async () => {
    initAgentsLogger('silent');
    f = await startV1Fixture(backend, { ROOM_MAX_AGENT_TURNS: '0' });
    mira = await f.api.post('/characters', { name: 'Mira Vance', description: 'A smuggler.' }).expect(201);
    rook = await f.api.post('/characters', { name: 'Captain Rook', description: 'A harbour master.' }).expect(201);
    const room = await f.api.post('/v1/rooms', { name: 'The Harbour' }).expect(201);
    for (const c of [mira, rook]) await f.api.post(`/v1/rooms/${room.id as string}/participants`, { characterId: c.id }).expect(201);
    const names = { [mira.id]: 'Mira Vance', [rook.id]: 'Captain Rook' };
    session = new voice.AgentSession({ llm: new RoomLLM({ baseUrl: f.t.url, key: f.key, roomId: room.id as string, speakerName: 'Ana', names }) });
    await session.start({ agent: new voice.Agent({ instructions: '' }) });
  });
  afterAll(async () => {
    await session?.close();
    await f?.close();
  });

  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body as Chat);
  const answer = (result: Awaited<ReturnType<voice.AgentSession['run']>>) => result.expect.nextEvent().isMessage({ role: 'assistant' }).event().item.textContent;

  it('gives the floor to the character addressed by name, without a director call', async () => {
    const before = chats().length;
    f.upstream.script({ text: 'Not a word to the harbour master.' });
    const result = await session.run({ userInput: 'Mira, got any cargo?' }).wait();
    expect(answer(result)).toBe('Mira Vance: Not a word to the harbour master.');
    result.expect.noMoreEvents();
    expect(chats().slice(before).filter(isDirectorCall)).toHaveLength(0);
  });

  it('asks the director who answers a line that names no one, and that character answers', async () => {
    const before = chats().length;
    f.upstream.script({ text: JSON.stringify({ speaker: rook.id }) }, { text: 'Harbour fees are due at dawn.' });
    const result = await session.run({ userInput: 'Who collects the fees here?' }).wait();
    expect(answer(result)).toBe('Captain Rook: Harbour fees are due at dawn.');
    const calls = chats().slice(before);
    expect(calls.filter(isDirectorCall)).toHaveLength(1);
    // The answering character heard the player's line, with the player's name.
    expect(JSON.stringify(calls.at(-1)?.messages)).toContain('Who collects the fees here?');
  });

  it('falls back to the character who spoke least recently when the director names no member', async () => {
    f.upstream.script({ text: '{"speaker": "character_nobody"}' }, { text: 'The night watch sleeps.' });
    const result = await session.run({ userInput: 'And the night watch?' }).wait();
    // Rook spoke last, Mira before him.
    expect(answer(result)).toBe('Mira Vance: The night watch sleeps.');
  });
});
