import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.ts';
import { roomTranscriptEntries } from '../../src/db/room-schema.ts';
import { TroupeError } from '../../src/errors.ts';
import { RoomService, type RoomHooks } from '../../src/rooms/service.ts';
import type { ApiClient } from '../support/client.ts';
import { BACKENDS } from '../support/env.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe.each(BACKENDS)('rooms on $kind', (backend) => {
  let t: TestServer;
  let api: ApiClient;
  let other: ApiClient;
  let projectId: string;
  let mira: { id: string };
  let rook: { id: string };
  let foreign: { id: string };

  beforeAll(async () => {
    t = await startTestServer(backend);
    const project = await t.newProject();
    api = project.client;
    projectId = project.projectId;
    other = (await t.newProject('other')).client;
    mira = await api.post('/characters', { name: 'Mira' }).expect(201);
    rook = await api.post('/characters', { name: 'Captain Rook' }).expect(201);
    foreign = await other.post('/characters', { name: 'Stranger' }).expect(201);
  });
  afterAll(() => t.close());

  const newRoom = async (name = 'Harbour') => (await api.post('/v1/rooms', { name }).expect(201)) as { id: string };
  const rooms = () => t.server.resources.rooms;

  it('creates a room with defaults, and with every field', async () => {
    const created = await api.post('/v1/rooms', { name: '  Harbour  ' }).expect(201);
    expect(created).toEqual({
      id: expect.stringMatching(/^room_[0-9a-z]{26}$/),
      createdAt: expect.stringMatching(ISO),
      projectId,
      name: 'Harbour',
      mode: 'freeform',
      scenePrompt: null,
      endedAt: null,
      participants: [],
    });
    expect(await api.get(`/v1/rooms/${created.id}`).expect(200)).toEqual(created);
    const scripted = await api.post('/v1/rooms', { name: 'x'.repeat(200), mode: 'scripted', scenePrompt: 's'.repeat(5000) }).expect(201);
    expect(scripted).toMatchObject({ name: 'x'.repeat(200), mode: 'scripted', scenePrompt: 's'.repeat(5000) });
  });

  it('documents Room, Participant and TranscriptEntry in /openapi.json', async () => {
    const doc = await t.client(null).get('/openapi.json').expect(200);
    const create = doc.paths['/v1/rooms'].post;
    expect(create.requestBody.content['application/json'].schema.required).toEqual(['name']);
    expect(create.responses['201'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Room' });
    expect(doc.components.schemas.Room.properties.mode.enum).toEqual(['freeform', 'scripted']);
    expect(Object.keys(doc.paths['/v1/rooms/{roomId}/participants'].post.responses)).toEqual(expect.arrayContaining(['201', '404', '409']));
    expect(doc.components.schemas.Participant.required).toContain('leftAt');
    expect(doc.components.schemas.TranscriptEntry.properties.speakerType.enum).toEqual(['user', 'agent']);
  });

  it.each([
    [{}, 'name', 'missing_parameter'],
    [{ name: '' }, 'name', 'invalid_parameter'],
    [{ name: '   ' }, 'name', 'invalid_parameter'],
    [{ name: 'x'.repeat(201) }, 'name', 'invalid_parameter'],
    [{ name: 7 }, 'name', 'invalid_parameter'],
    [{ name: 'A', mode: 'chaos' }, 'mode', 'invalid_parameter'],
    [{ name: 'A', scenePrompt: 's'.repeat(5001) }, 'scenePrompt', 'invalid_parameter'],
    [{ name: 'A', scenePrompt: 5 }, 'scenePrompt', 'invalid_parameter'],
    [{ name: 'A', endedAt: null }, 'endedAt', 'unknown_parameter'],
  ])('rejects create body %j naming %s', async (body, param, code) => {
    const res = await api.post('/v1/rooms', body).expect(400);
    expect(res.error).toMatchObject({ type: 'invalid_request_error', param, code });
  });

  it('adds participants with their own conversation, once at a time', async () => {
    const room = await newRoom();
    const added = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    expect(added).toEqual({
      id: expect.stringMatching(/^participant_[0-9a-z]{26}$/),
      createdAt: expect.stringMatching(ISO),
      roomId: room.id,
      characterId: mira.id,
      conversationId: expect.stringMatching(/^conv_/),
      rtcIdentity: `agent-${mira.id}`,
      leftAt: null,
    });
    expect(await api.get(`/conversations/${added.conversationId}`).expect(200)).toMatchObject({ characterId: mira.id, messages: [] });
    const again = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(409);
    expect(again.error).toMatchObject({ code: 'participant_exists', param: 'characterId' });
    const second = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: rook.id }).expect(201);
    expect(second.conversationId).not.toBe(added.conversationId);
    expect((await api.get(`/v1/rooms/${room.id}`).expect(200)).participants).toEqual([added, second]);
    // Two adds of one character at once: exactly one gets in.
    const race = await newRoom();
    const statuses = await Promise.all([1, 2].map(async () => (await api.post(`/v1/rooms/${race.id}/participants`, { characterId: rook.id })).status));
    expect(statuses.sort()).toEqual([201, 409]);
  });

  it('answers 404 for unknown or foreign characters and rooms, 400 for a bad body', async () => {
    const room = await newRoom();
    for (const characterId of ['character_nope', foreign.id]) {
      const res = await api.post(`/v1/rooms/${room.id}/participants`, { characterId }).expect(404);
      expect(res.error).toMatchObject({ code: 'character_not_found', param: 'characterId' });
      expect(res.error.message).toContain(characterId);
    }
    expect((await api.post(`/v1/rooms/${room.id}/participants`, {}).expect(400)).error.param).toBe('characterId');
    await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    expect((await api.get('/v1/rooms/room_nope').expect(404)).error.code).toBe('room_not_found');
    await other.get(`/v1/rooms/${room.id}`).expect(404);
    await other.post(`/v1/rooms/${room.id}/participants`, { characterId: foreign.id }).expect(404);
    await other.delete(`/v1/rooms/${room.id}/participants/${mira.id}`).expect(404);
    await other.get(`/v1/rooms/${room.id}/transcript`).expect(404);
    expect((await other.post(`/v1/rooms/${room.id}/end`).expect(404)).error.code).toBe('room_not_found');
    expect((await other.get('/v1/rooms').expect(200)).map((r: { id: string }) => r.id)).not.toContain(room.id);
    // The foreign attempts changed nothing.
    expect(await api.get(`/v1/rooms/${room.id}`).expect(200)).toMatchObject({ endedAt: null, participants: [{ characterId: mira.id, leftAt: null }] });
  });

  it('removes a participant: GET room keeps it with leftAt, the list drops it, and it may rejoin', async () => {
    const room = await newRoom();
    const first = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    const stays = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: rook.id }).expect(201);
    const left = await api.delete(`/v1/rooms/${room.id}/participants/${mira.id}`).expect(200);
    expect(left).toEqual({ ...first, leftAt: expect.stringMatching(ISO) });
    const again = await api.delete(`/v1/rooms/${room.id}/participants/${mira.id}`).expect(404);
    expect(again.error.code).toBe('participant_not_found');
    await api.delete(`/v1/rooms/${room.id}/participants/${foreign.id}`).expect(404);
    expect((await api.get(`/v1/rooms/${room.id}`).expect(200)).participants).toEqual([left, stays]);
    const listed = (await api.get('/v1/rooms').expect(200)).find((r: { id: string }) => r.id === room.id);
    expect(listed.participants).toEqual([stays]);
    const back = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    expect(back.id).not.toBe(first.id);
    expect((await api.get(`/v1/rooms/${room.id}`).expect(200)).participants.map((p: { id: string }) => p.id)).toEqual([first.id, stays.id, back.id]);
  });

  it('ends a room: participants leave, it leaves the list and refuses further changes with 409', async () => {
    const room = await newRoom('Tavern');
    await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    const ended = await api.post(`/v1/rooms/${room.id}/end`).expect(200);
    expect(ended).toMatchObject({ id: room.id, name: 'Tavern', endedAt: expect.stringMatching(ISO) });
    expect(ended.participants).toEqual([expect.objectContaining({ characterId: mira.id, leftAt: ended.endedAt })]);
    expect(await api.get(`/v1/rooms/${room.id}`).expect(200)).toEqual(ended);
    expect((await api.get('/v1/rooms').expect(200)).map((r: { id: string }) => r.id)).not.toContain(room.id);
    for (const res of [
      await api.post(`/v1/rooms/${room.id}/participants`, { characterId: rook.id }).expect(409),
      await api.delete(`/v1/rooms/${room.id}/participants/${mira.id}`).expect(409),
      await api.post(`/v1/rooms/${room.id}/end`).expect(409),
    ]) {
      expect(res.error).toMatchObject({ type: 'invalid_request_error', code: 'room_ended' });
    }
    await api.post('/v1/rooms/room_nope/end').expect(404);
  });

  it('lists active rooms in creation order, paged with limit/after and a Link header', async () => {
    const a = await newRoom('A');
    const b = await newRoom('B');
    const all = (await api.get('/v1/rooms').expect(200)) as { id: string; endedAt: null }[];
    const ids = all.map((r) => r.id);
    expect([...ids].sort()).toEqual(ids);
    expect(ids.slice(-2)).toEqual([a.id, b.id]);
    expect(all.every((r) => r.endedAt === null)).toBe(true);
    const page = await api.get(`/v1/rooms?limit=1&after=${ids.at(-3)}`);
    expect(page.body.map((r: { id: string }) => r.id)).toEqual([a.id]);
    expect(page.headers.get('link')).toBe(`</v1/rooms?limit=1&after=${a.id}>; rel="next"`);
    expect((await api.get('/v1/rooms?limit=0').expect(400)).error.param).toBe('limit');
  });

  it('returns the transcript in spoken order, with gap-free positions under concurrent appends', async () => {
    const room = await newRoom();
    expect(await api.get(`/v1/rooms/${room.id}/transcript`).expect(200)).toEqual([]);
    await rooms().appendTranscript(projectId, room.id, { speakerType: 'user', characterId: null, speakerName: 'Player', content: 'Ahoy!' });
    await rooms().appendTranscript(projectId, room.id, { speakerType: 'agent', characterId: rook.id, content: 'Who goes there?' });
    // On PostgreSQL a second connection pool stands in for a second process appending at once.
    const { config, characters, conversations } = t.server.resources;
    const second = config.databaseUrl ? await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 4 }) : null;
    const services = [rooms(), ...(second ? [new RoomService({ db: second.db, characters, conversations })] : [])];
    const said = Array.from({ length: 12 }, (_, i) => `line ${i}`);
    try {
      await Promise.all(
        said.map((content, i) => services[i % services.length]!.appendTranscript(projectId, room.id, { speakerType: 'agent', characterId: mira.id, content })),
      );
    } finally {
      await second?.close();
    }
    const transcript = await api.get(`/v1/rooms/${room.id}/transcript`).expect(200);
    expect(transcript.slice(0, 2)).toEqual([
      { id: expect.stringMatching(/^entry_/), createdAt: expect.stringMatching(ISO), roomId: room.id, speakerType: 'user', characterId: null, speakerName: 'Player', content: 'Ahoy!' },
      { id: expect.stringMatching(/^entry_/), createdAt: expect.stringMatching(ISO), roomId: room.id, speakerType: 'agent', characterId: rook.id, speakerName: 'Captain Rook', content: 'Who goes there?' },
    ]);
    expect(transcript.slice(2).map((e: { content: string }) => e.content).sort()).toEqual([...said].sort());
    const stored = await t.server.resources.database.db
      .select({ id: roomTranscriptEntries.id, seq: roomTranscriptEntries.seq })
      .from(roomTranscriptEntries)
      .where(eq(roomTranscriptEntries.roomId, room.id))
      .orderBy(asc(roomTranscriptEntries.seq));
    expect(stored.map((e) => e.seq)).toEqual(Array.from({ length: 14 }, (_, i) => i + 1));
    expect(stored.map((e) => e.id)).toEqual(transcript.map((e: { id: string }) => e.id));
  });

  it('stores a keyed entry once, refuses malformed ones, and refuses new ones once the room ended', async () => {
    const room = await newRoom();
    const entry = { speakerType: 'user' as const, characterId: null, content: 'Once', clientKey: 'utt-1' };
    const first = await rooms().appendTranscript(projectId, room.id, entry);
    await api.post(`/v1/rooms/${room.id}/end`).expect(200);
    expect(await rooms().appendTranscript(projectId, room.id, entry)).toEqual(first);
    await expect(rooms().appendTranscript(projectId, room.id, { ...entry, clientKey: 'utt-2' })).rejects.toMatchObject({ detailCode: 'room_ended' });
    await expect(rooms().appendTranscript(projectId, room.id, { speakerType: 'agent', characterId: null, content: 'x' })).rejects.toBeInstanceOf(TroupeError);
    await expect(rooms().appendTranscript(projectId, 'room_nope', entry)).rejects.toMatchObject({ detailCode: 'room_not_found' });
    const open = await newRoom();
    await expect(rooms().appendTranscript(projectId, open.id, { speakerType: 'agent', characterId: foreign.id, speakerName: 'Spy', content: 'x' })).rejects.toMatchObject({
      detailCode: 'character_not_found',
    });
    expect(await api.get(`/v1/rooms/${room.id}/transcript`).expect(200)).toEqual([{ ...first }]);
  });

  it('marks a room started once it has a participant', async () => {
    const room = await newRoom();
    await expect(rooms().markStarted(projectId, room.id)).rejects.toMatchObject({ code: 'invalid_request', detailCode: 'room_has_no_participants' });
    await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    const started = await rooms().markStarted(projectId, room.id);
    expect(started).toMatchObject({ first: true, room: { startedAt: expect.stringMatching(ISO) } });
    expect((await rooms().markStarted(projectId, room.id)).first).toBe(false);
  });

  it('calls its hooks after each stored change, with the dispatch id kept per participant', async () => {
    const calls: string[] = [];
    const { resources } = t.server;
    const hooks: RoomHooks = {
      participantAdded: async (room, participant) => {
        calls.push(`added ${participant.characterId}`);
        await service.setDispatchId(participant.id, `dispatch-${participant.characterId}`);
      },
      participantRemoved: async (_room, participant) => void calls.push(`removed ${participant.characterId}`),
      ended: async (room, left) => void calls.push(`ended ${room.id} ${left.map((p) => p.dispatchId).join(',')}`),
    };
    const service: RoomService = new RoomService({ db: resources.database.db, characters: resources.characters, conversations: resources.conversations, hooks });
    const room = await service.create(projectId, { name: 'Hooked', mode: 'freeform', scenePrompt: null });
    await service.addParticipant(projectId, room.id, mira.id);
    await service.addParticipant(projectId, room.id, rook.id);
    await service.removeParticipant(projectId, room.id, mira.id);
    await service.end(projectId, room.id);
    expect(calls).toEqual([`added ${mira.id}`, `added ${rook.id}`, `removed ${mira.id}`, `ended ${room.id} dispatch-${rook.id}`]);
    // The dispatch id is the service's own: the interface's Participant does not show it.
    expect((await service.get(projectId, room.id)).participants[0]).not.toHaveProperty('dispatchId');
  });
});
