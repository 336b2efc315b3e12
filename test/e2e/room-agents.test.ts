// The voice agents' side of the room WebSocket, as text: who may connect with an agent token, and
// how a room with a character's voice waits for each of its lines to be spoken and stores what
// was heard. The audio side is test/e2e/voice-room.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signAgentToken } from '../../src/rooms/agent-token.ts';
import { BACKENDS } from '../support/env.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket, type TestSocket } from '../support/ws-client.ts';

const LIVEKIT = { apiKey: 'APIagentstest', apiSecret: 'agents-test-secret-0123456789abcdefghijklmn' };

type Entry = { speakerType: string; characterId: string | null; content: string };

describe.each(BACKENDS)('voice agents on the room WebSocket on $kind', (backend) => {
  let f: V1Fixture;
  let mira: { id: string };
  let rook: { id: string };
  let wsBase: string;
  const open: TestSocket[] = [];

  beforeAll(async () => {
    f = await startV1Fixture(backend, { LIVEKIT_URL: 'ws://127.0.0.1:9', LIVEKIT_API_KEY: LIVEKIT.apiKey, LIVEKIT_API_SECRET: LIVEKIT.apiSecret, ROOM_MAX_AGENT_TURNS: '0' });
    mira = await f.api.post('/characters', { name: 'Mira Vance' }).expect(201);
    rook = await f.api.post('/characters', { name: 'Captain Rook' }).expect(201);
    wsBase = f.t.url.replace('http://', 'ws://');
  });
  afterAll(async () => {
    for (const s of open) await s.close();
    await f?.close();
  });

  const newRoom = async () => {
    const room = await f.api.post('/v1/rooms', { name: 'The Gate' }).expect(201);
    for (const c of [mira, rook]) await f.api.post(`/v1/rooms/${room.id as string}/participants`, { characterId: c.id }).expect(201);
    return room.id as string;
  };
  const agentToken = (roomId: string, characterId: string, keys = LIVEKIT) => signAgentToken(keys, { projectId: f.projectId, roomId, characterId }, 600);
  const connect = async (roomId: string, token: string) => {
    const s = await openSocket(`${wsBase}/v1/rooms/${roomId}/ws?token=${encodeURIComponent(token)}`);
    open.push(s);
    await s.next('ready');
    return s;
  };
  const transcript = async (roomId: string) => ((await f.api.get(`/v1/rooms/${roomId}/transcript`).expect(200)) as Entry[]).map((e) => e.content);

  it('tells /readyz what voice agents lack, without making the API unready', async () => {
    const ready = await fetch(`${f.t.url}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { voice: { ready: boolean; problems: string[] } };
    expect(body.voice.ready).toBe(false);
    expect(body.voice.problems).toEqual([expect.stringContaining('STT_MODEL is not set'), expect.stringContaining('TTS_MODEL is not set')]);
  });

  it("opens its own room's WebSocket only, and nothing else", async () => {
    const roomId = await newRoom();
    const elsewhere = await newRoom();
    await connect(roomId, await agentToken(roomId, mira.id));
    await expect(openSocket(`${wsBase}/v1/rooms/${elsewhere}/ws?token=${await agentToken(roomId, mira.id)}`)).rejects.toThrow('HTTP 404');
    await expect(openSocket(`${wsBase}/v1/rooms/${roomId}/ws?token=${await agentToken(roomId, mira.id, { ...LIVEKIT, apiSecret: 'not-the-secret-0123456789abcdefghijklmnop' })}`)).rejects.toThrow('HTTP 401');
    // Not an API key: REST and conversation sockets refuse it.
    const token = await agentToken(roomId, mira.id);
    const rest = await fetch(`${f.t.url}/v1/rooms/${roomId}/transcript`, { headers: { authorization: `Bearer ${token}` } });
    expect(rest.status).toBe(401);
  });

  it("waits for a voiced character's line to be spoken and stores what was heard; the player then has the floor", async () => {
    const roomId = await newRoom();
    const watch = await connect(roomId, f.key);
    const voice = await connect(roomId, await agentToken(roomId, mira.id));
    f.upstream.script({ text: 'The gate is open. Walk through quickly.' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Mira, open the gate', speakerName: 'Ada' }).expect(202);
    expect(await voice.next('speaker')).toMatchObject({ characterId: mira.id });
    const chunk = await voice.next('chunk');
    const replyId = chunk.replyId as string;
    // The text is complete, but nothing is stored until the line has played.
    for (;;) if ((await voice.next('chunk')).done === true) break;
    expect(await transcript(roomId)).toEqual(['Mira, open the gate']);
    // A player may not report lines.
    watch.send({ type: 'spoken', replyId, text: 'The gate', interrupted: true });
    expect(await watch.next('error')).toMatchObject({ code: 'agents_only', message: expect.stringContaining('voice agent') });
    // Another character's agent cannot report Mira's line.
    const rookVoice = await connect(roomId, await agentToken(roomId, rook.id));
    rookVoice.send({ type: 'spoken', replyId, text: 'The gate', interrupted: true });
    voice.send({ type: 'spoken', replyId, text: 'The gate is open. Walk', interrupted: true });
    expect((await watch.next('transcript')).entry).toMatchObject({ speakerType: 'agent', characterId: mira.id, content: 'The gate is open. Walk' });
    expect(await watch.next('speaker')).toMatchObject({ characterId: null });
    expect(await transcript(roomId)).toEqual(['Mira, open the gate', 'The gate is open. Walk']);
  });

  it('stores the whole line when the voice leaves before reporting, and does not wait for a character without one', async () => {
    const roomId = await newRoom();
    const watch = await connect(roomId, f.key);
    const voice = await connect(roomId, await agentToken(roomId, mira.id));
    f.upstream.script({ text: 'Not tonight.' }, { text: 'Move along.' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Mira, open the gate' }).expect(202);
    for (;;) if ((await voice.next('chunk')).done === true) break;
    await voice.close();
    expect((await watch.next('transcript')).entry).toMatchObject({ characterId: null });
    expect((await watch.next('transcript')).entry).toMatchObject({ characterId: mira.id, content: 'Not tonight.' });
    // Rook has no voice here: his line is stored as soon as it is complete.
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Captain Rook, open it then' }).expect(202);
    await watch.next('transcript');
    expect((await watch.next('transcript')).entry).toMatchObject({ characterId: rook.id, content: 'Move along.' });
  });
});
