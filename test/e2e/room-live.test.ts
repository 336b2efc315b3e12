import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { startFakeLiveKit, type FakeLiveKit } from '../support/fake-livekit.ts';
import { GameClient } from '../support/game-client.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket, type TestSocket } from '../support/ws-client.ts';

type Chat = { messages: { role: string; content: string }[] };
type Entry = { speakerType: string; characterId: string | null; speakerName: string | null; content: string };

const isDirectorCall = (body: Chat) => /You (direct|are the director)/.test(body.messages[0]?.content ?? '');

describe.each(BACKENDS)('rooms as text scenes on $kind', (backend) => {
  let f: V1Fixture;
  let mira: { id: string };
  let rook: { id: string };
  let bell: { id: string };
  let wsBase: string;

  beforeAll(async () => {
    f = await startV1Fixture(backend, { ROOM_MAX_AGENT_TURNS: '2', CONVERSATION_IDLE_MS: '60000' });
    const ring = await f.api.post('/capabilities', { name: 'ring_bell', type: 'client_function_fire', parameters: [] }).expect(201);
    mira = await f.api.post('/characters', { name: 'Mira Vance', description: 'A smuggler.' }).expect(201);
    rook = await f.api.post('/characters', { name: 'Captain Rook', description: 'A harbour master.' }).expect(201);
    bell = await f.api.post('/characters', { name: 'Bellringer', description: 'Rings the harbour bell.', capabilityGroupIds: [ring.id] }).expect(201);
    wsBase = f.t.url.replace('http://', 'ws://');
  });
  afterAll(() => f.close());

  const newRoom = async (body: Record<string, unknown> = {}, members: { id: string }[] = [mira, rook]) => {
    const room = await f.api.post('/v1/rooms', { name: 'The Harbour', ...body }).expect(201);
    for (const m of members) await f.api.post(`/v1/rooms/${room.id as string}/participants`, { characterId: m.id }).expect(201);
    return room.id as string;
  };
  const socket = async (roomId: string) => {
    const s = await openSocket(`${wsBase}/v1/rooms/${roomId}/ws?token=${f.key}`);
    await s.next('ready');
    return s;
  };
  const transcript = async (roomId: string) => ((await f.api.get(`/v1/rooms/${roomId}/transcript`).expect(200)) as Entry[]).map((e) => `${e.speakerName ?? 'Player'}: ${e.content}`);
  /** One character's line from the room's events: who took the floor, what streamed, what was stored. */
  const line = async (s: TestSocket) => {
    const speaker = await s.next('speaker');
    let text = '';
    let entry: Entry | null = null;
    for (;;) {
      const event = await s.next();
      if (event.type === 'error') throw new Error(`error event: ${JSON.stringify(event)}`);
      if (event.type === 'chunk') text += String(event.content);
      if (event.type === 'transcript') entry = event.entry as Entry;
      if (event.type === 'speaker' && event.characterId === null) break;
    }
    return { speaker: speaker.characterId, text, entry };
  };
  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body as Chat);

  it('answers a line that addresses a character by name, streaming it and storing both lines in order', async () => {
    const roomId = await newRoom();
    const s = await socket(roomId);
    f.upstream.script({ text: 'Not a word to the harbour master.' });
    const said = await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Mira, got any cargo?', speakerName: 'Ana' }).expect(202);
    expect(said).toMatchObject({ roomId, speakerType: 'user', characterId: null, content: 'Mira, got any cargo?' });
    expect((await s.next('transcript')).entry).toMatchObject({ id: said.id, speakerType: 'user' });
    const answer = await line(s);
    expect(answer).toMatchObject({ speaker: mira.id, text: 'Not a word to the harbour master.', entry: { speakerType: 'agent', characterId: mira.id, speakerName: 'Mira Vance' } });
    expect(await transcript(roomId)).toEqual(['Ana: Mira, got any cargo?', 'Mira Vance: Not a word to the harbour master.']);
    // Mira was asked without a director call: she was addressed by (first) name.
    expect(chats().filter(isDirectorCall)).toHaveLength(0);
    // Her own conversation keeps what she heard and said in the room.
    const room = await f.api.get(`/v1/rooms/${roomId}`).expect(200);
    const seat = (room.participants as { characterId: string; conversationId: string }[]).find((p) => p.characterId === mira.id);
    const memory = await f.api.get(`/conversations/${seat?.conversationId ?? ''}`).expect(200);
    expect((memory.messages as { role: string; content: string }[]).map((m) => `${m.role}:${m.content}`)).toEqual(['player:Ana: Mira, got any cargo?', 'character:Not a word to the harbour master.']);
    await s.close();
  });

  it('stores and answers a line resent with the same Idempotency-Key once, on HTTP and the socket', async () => {
    const roomId = await newRoom();
    const s = await socket(roomId);
    f.upstream.script({ text: 'Once is enough.' });
    const send = (content: string, key: string) => f.api.post(`/v1/rooms/${roomId}/messages`, { content, speakerName: 'Ana' }, { 'idempotency-key': key });
    const first = await send('Mira, once?', 'line-1').expect(202);
    await s.next('transcript');
    expect((await line(s)).text).toBe('Once is enough.');
    const again = await send('Mira, once?', 'line-1').expect(202);
    expect(again.id).toBe(first.id);
    expect((await send('Mira, twice?', 'line-1').expect(409)).error).toMatchObject({ code: 'idempotency_key_reused', param: 'idempotencyKey' });
    expect((await send('Mira?', 'bad key').expect(400)).error).toMatchObject({ param: 'Idempotency-Key' });
    s.send({ content: 'Rook?', idempotencyKey: 'no spaces allowed' });
    expect(await s.next('error')).toMatchObject({ param: 'idempotencyKey' });
    // The socket's resend is handled in the room's order, before the next line.
    s.send({ content: 'Mira, once?', speakerName: 'Ana', idempotencyKey: 'line-1' });
    s.send({ content: 'Rook, anything?', speakerName: 'Ana', idempotencyKey: 'line-2' });
    expect((await s.next('transcript')).entry).toMatchObject({ content: 'Rook, anything?' });
    // The fake upstream echoes what Rook heard (a script could be taken by the director's call after Mira).
    expect((await line(s)).speaker).toBe(rook.id);
    // Nothing was stored twice, and Mira answered once.
    expect((await transcript(roomId)).slice(0, 3)).toEqual(['Ana: Mira, once?', 'Mira Vance: Once is enough.', 'Ana: Rook, anything?']);
    expect(await transcript(roomId)).toHaveLength(4);
    await s.close();
  });

  it('lets the director pick the most relevant character when nobody is named', async () => {
    const roomId = await newRoom();
    const s = await socket(roomId);
    f.upstream.script({ text: JSON.stringify({ speaker: rook.id }) }, { text: 'Harbour fees are due.' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Who collects the fees here?' }).expect(202);
    await s.next('transcript');
    expect(await line(s)).toMatchObject({ speaker: rook.id, text: 'Harbour fees are due.' });
    const director = chats().filter(isDirectorCall).at(-1);
    expect(JSON.stringify(director)).toContain('Who collects the fees here?');
    await s.close();
  });

  it('lets characters answer each other up to ROOM_MAX_AGENT_TURNS, one at a time, then gives the floor back', async () => {
    const roomId = await newRoom();
    const s = await socket(roomId);
    f.upstream.script(
      { text: 'Ask Captain Rook.' }, // Mira, addressed by the player
      { text: 'Mira knows more than she says.' }, // Rook, named by Mira (1st character-to-character turn)
      { text: 'Rook, you flatter me.' }, // Mira, named by Rook (2nd)
      { text: 'never spoken: the limit was reached' },
    );
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Mira, is the harbour safe?' }).expect(202);
    await s.next('transcript');
    const speakers = [(await line(s)).speaker, (await line(s)).speaker, (await line(s)).speaker];
    expect(speakers).toEqual([mira.id, rook.id, mira.id]);
    expect(await transcript(roomId)).toEqual([
      'Player: Mira, is the harbour safe?',
      'Mira Vance: Ask Captain Rook.',
      'Captain Rook: Mira knows more than she says.',
      'Mira Vance: Rook, you flatter me.',
    ]);
    f.upstream.clearScripts();
    await s.close();
  });

  it('gives each character only what was said while it was in the room, with speaker names', async () => {
    const roomId = await newRoom({}, [mira]);
    f.upstream.script({ text: 'Quiet night.' });
    const s = await socket(roomId);
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'The password is heron.', speakerName: 'Ana' }).expect(202);
    await s.next('transcript');
    await line(s);
    await f.api.post(`/v1/rooms/${roomId}/participants`, { characterId: rook.id }).expect(201);
    expect(await s.next('participant')).toMatchObject({ change: 'joined', kind: 'character', characterId: rook.id, name: 'Captain Rook' });
    f.upstream.script({ text: 'I heard nothing of a password.' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Captain Rook, what is the password?', speakerName: 'Ana' }).expect(202);
    await s.next('transcript');
    expect(await line(s)).toMatchObject({ speaker: rook.id });
    const sent = chats().at(-1)?.messages ?? [];
    expect(sent[0]?.content).toContain('Also here: Mira Vance.');
    expect(sent.slice(1)).toEqual([{ role: 'user', content: 'Ana: Captain Rook, what is the password?' }]);
    await s.close();
  });

  it('streams client capability calls to the room and to game clients, with the same events and state', async () => {
    const roomId = await newRoom({}, [bell, rook]);
    const game = await GameClient.join(f.t.url, f.key, roomId);
    const state = game.state as unknown as { members: { characterId: string }[]; status: string };
    expect(state.members.map((m) => m.characterId)).toEqual([bell.id, rook.id]);
    expect(state.status).toBe('created');
    f.upstream.script({ text: 'Dong!', toolCalls: [{ name: 'ring_bell', arguments: '{}' }] }, { text: ' There.' });
    game.send('message', { content: 'Bellringer, ring it!', speakerName: 'Kai' });
    expect(await game.next('transcript')).toMatchObject({ entry: { speakerName: 'Kai', content: 'Bellringer, ring it!' } });
    expect(await game.next('speaker')).toMatchObject({ characterId: bell.id });
    expect(await game.next('capability')).toMatchObject({ characterId: bell.id, name: 'ring_bell', params: {} });
    await game.until((st) => ((st as unknown as { transcript: unknown[] }).transcript ?? []).length === 2);
    game.send('message', { content: '' });
    expect(await game.next('error')).toMatchObject({ code: 'invalid_parameter', param: 'content' });
    await game.leave();
  });

  it('answers bad input on the socket with an error event and refuses lines once the room ended', async () => {
    const roomId = await newRoom();
    const s = await socket(roomId);
    s.send('not json');
    expect(await s.next('error')).toMatchObject({ code: 'invalid_json' });
    s.ws.send(Buffer.concat([Buffer.from('{"content":"x'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), { binary: true });
    expect(await s.next('error')).toMatchObject({ code: 'invalid_utf8' });
    s.send({ content: 'nul\u0000here' });
    expect(await s.next('error')).toMatchObject({ code: 'null_character', param: 'content' });
    s.send(JSON.stringify(JSON.parse('['.repeat(100) + ']'.repeat(100))));
    expect(await s.next('error')).toMatchObject({ type: 'error' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'nul\u0000here' }).expect(400);
    s.send({ content: 'hi', speakerName: 'x'.repeat(101) });
    expect(await s.next('error')).toMatchObject({ param: 'speakerName' });
    await f.api.post(`/v1/rooms/${roomId}/end`, {}).expect(200);
    expect(await s.next('ended')).toMatchObject({ type: 'ended' });
    const refused = await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'anyone?' }).expect(409);
    expect(refused.error.code).toBe('room_ended');
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: '   ' }).expect(400);
    await s.close();
  });

  it("refuses the writes of a room actor another took over, and says the line again through the new one", async () => {
    const roomId = await newRoom({}, [mira]);
    const s = await socket(roomId);
    f.upstream.script({ text: 'First.' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Mira, one' }).expect(202);
    await s.next('transcript');
    await line(s);
    // Another process claims the room (as it would after this one was cut off from Redis).
    const projectId = (await f.api.get(`/v1/rooms/${roomId}`).expect(200)).projectId as string;
    await f.t.server.resources.rooms.claim(roomId);
    f.upstream.script({ text: 'Second.' });
    await f.api.post(`/v1/rooms/${roomId}/messages`, { content: 'Mira, two' }).expect(202);
    await s.next('transcript');
    await line(s);
    expect(await transcript(roomId)).toEqual(['Player: Mira, one', 'Mira Vance: First.', 'Player: Mira, two', 'Mira Vance: Second.']);
    expect(projectId).toMatch(/^proj_/);
    expect(f.t.logs.some((l) => l.msg === 'room actor superseded by another process; disposing it')).toBe(true);
    await s.close();
  });

  it("answers 404 for another project's room on every live surface", async () => {
    const roomId = await newRoom();
    const other = await f.t.newProject('other');
    await other.client.post(`/v1/rooms/${roomId}/messages`, { content: 'hello' }).expect(404);
    await expect(openSocket(`${wsBase}/v1/rooms/${roomId}/ws?token=${other.key}`)).rejects.toThrow('HTTP 404');
    await expect(GameClient.join(f.t.url, other.key, roomId)).rejects.toThrow();
  });
});

describe.each(BACKENDS)('scripted rooms started on LiveKit on $kind', (backend) => {
  let f: V1Fixture;
  let fake: FakeLiveKit;
  let mira: { id: string };
  let rook: { id: string };

  beforeAll(async () => {
    fake = await startFakeLiveKit();
    f = await startV1Fixture(backend, { LIVEKIT_URL: fake.url, LIVEKIT_API_KEY: fake.apiKey, LIVEKIT_API_SECRET: fake.apiSecret });
    mira = await f.api.post('/characters', { name: 'Mira Vance', description: 'A smuggler.' }).expect(201);
    rook = await f.api.post('/characters', { name: 'Captain Rook', description: 'A harbour master.' }).expect(201);
  });
  afterAll(async () => {
    await f.close();
    await fake.close();
  });

  it('opens a scripted scene with the character the scene calls for, with its aim, once', async () => {
    const room = await f.api.post('/v1/rooms', { name: 'Smugglers Cove', mode: 'scripted', scenePrompt: 'Rook catches Mira unloading crates at night.' }).expect(201);
    for (const c of [mira, rook]) await f.api.post(`/v1/rooms/${room.id as string}/participants`, { characterId: c.id }).expect(201);
    const s = await openSocket(`${f.t.url.replace('http://', 'ws://')}/v1/rooms/${room.id as string}/ws?token=${f.key}`);
    await s.next('ready');
    f.upstream.script({ text: `{"speaker": "${rook.id}", "direction": "Demand to see what is in the crates."}` }, { text: 'Open those crates, Vance.' }, { text: '{"speaker": null}' });
    expect(await f.api.post(`/v1/rooms/${room.id as string}/start`).expect(200)).toEqual({ started: true });
    expect(await s.next('speaker')).toMatchObject({ characterId: rook.id });
    expect(await s.reply()).toBe('Open those crates, Vance.');
    const rookCall = f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body as Chat).find((b) => !isDirectorCall(b));
    expect(rookCall?.messages[0]?.content).toContain('Rook catches Mira unloading crates at night.');
    expect(rookCall?.messages[0]?.content).toContain('Your aim in this line: Demand to see what is in the crates.');
    // Mira was named, but in a scripted scene the scene decides: here, the floor goes back.
    expect(await s.next('speaker')).toMatchObject({ characterId: null });
    await f.api.post(`/v1/rooms/${room.id as string}/start`).expect(200); // idempotent: no second opening
    const game = await GameClient.join(f.t.url, f.key, room.id as string);
    expect((game.state as unknown as { status: string; transcript: unknown[] }).status).toBe('live');
    expect((game.state as unknown as { transcript: unknown[] }).transcript).toHaveLength(1);
    // A human joining the voice session reaches every listener.
    const hook = await fake.webhook('participant_joined', room.id as string, 'player-7');
    await f.t.client(null).post('/v1/livekit/webhook', hook.body, { authorization: hook.authorization, 'content-type': hook.contentType }).expect(200);
    expect(await s.next('participant')).toMatchObject({ change: 'joined', kind: 'human', identity: 'player-7' });
    await game.leave();
    await s.close();
  });
});
