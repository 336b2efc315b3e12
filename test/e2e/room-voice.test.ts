import { TokenVerifier } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LiveKitControlPlane } from '../../src/livekit/control-plane.ts';
import { LiveKitWebhooks } from '../../src/livekit/webhooks.ts';
import type { StoredRoom } from '../../src/rooms/repository.ts';
import { RoomVoiceControl, type HumanPresence } from '../../src/rooms/voice-control.ts';
import type { ApiClient } from '../support/client.ts';
import { BACKENDS } from '../support/env.ts';
import { startFakeLiveKit, type FakeLiveKit } from '../support/fake-livekit.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const AGENT_NAME = 'troupe-test-agent';
const TTL_S = 600;

describe.each(BACKENDS)('room voice control on $kind', (backend) => {
  let fake: FakeLiveKit;
  let t: TestServer;
  let api: ApiClient;
  let other: ApiClient;
  let projectId: string;
  const cast: Record<'mira' | 'rook' | 'nell', { id: string; name: string }> = { mira: { id: '', name: '' }, rook: { id: '', name: '' }, nell: { id: '', name: '' } };

  beforeAll(async () => {
    fake = await startFakeLiveKit();
    t = await startTestServer(backend, {
      env: { LIVEKIT_URL: fake.url, LIVEKIT_API_KEY: fake.apiKey, LIVEKIT_API_SECRET: fake.apiSecret, LIVEKIT_AGENT_NAME: AGENT_NAME, ROOM_TOKEN_TTL_S: String(TTL_S) },
    });
    const project = await t.newProject();
    api = project.client;
    projectId = project.projectId;
    other = (await t.newProject('other')).client;
    cast.mira = await api.post('/characters', { name: 'Mira' }).expect(201);
    cast.rook = await api.post('/characters', { name: 'Captain Rook' }).expect(201);
    cast.nell = await api.post('/characters', { name: 'Nell' }).expect(201);
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  const newRoom = async (...who: (keyof typeof cast)[]) => {
    const room = (await api.post('/v1/rooms', { name: 'Harbour' }).expect(201)) as { id: string };
    for (const name of who) await api.post(`/v1/rooms/${room.id}/participants`, { characterId: cast[name].id }).expect(201);
    return room;
  };
  const stored = (roomId: string): Promise<StoredRoom> => t.server.resources.rooms.find(projectId, roomId);
  const callsTo = (method: string, roomId: string) => fake.calls.filter((c) => c.method === method && (c.body.room ?? c.body.name) === roomId);
  const dispatchesOf = (roomId: string) => [...fake.dispatches.values()].filter((d) => d.room === roomId);

  it('signs a join token for exactly this room: microphone, subscribe and data, nothing more', async () => {
    const room = await newRoom();
    const before = fake.calls.length;
    const reply = await api.get(`/v1/rooms/${room.id}/token?identity=player-1&name=Ada`).expect(200);
    expect(Object.keys(reply).sort()).toEqual(['token', 'url']);
    expect(reply.url).toBe(fake.url);
    expect(fake.calls.length).toBe(before); // signed here, LiveKit is not called
    const claims = await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(reply.token);
    expect(Object.keys(claims).sort()).toEqual(['exp', 'iss', 'name', 'nbf', 'sub', 'video']);
    expect(claims).toMatchObject({ iss: fake.apiKey, sub: 'player-1', name: 'Ada' });
    expect(claims.video).toEqual({ room: room.id, roomJoin: true, canPublish: true, canPublishSources: ['microphone'], canSubscribe: true, canPublishData: true });
    expect((claims.exp ?? 0) - (claims.nbf ?? 0)).toBe(TTL_S);
  });

  it('generates an identity when none is given, and refuses reserved or malformed ones naming the param', async () => {
    const room = await newRoom();
    const verifier = new TokenVerifier(fake.apiKey, fake.apiSecret);
    const first = await verifier.verify((await api.get(`/v1/rooms/${room.id}/token`).expect(200)).token);
    const second = await verifier.verify((await api.get(`/v1/rooms/${room.id}/token`).expect(200)).token);
    expect(first.sub).toMatch(/^user-[0-9a-f]{16}$/);
    expect(second.sub).not.toBe(first.sub);
    expect(first.name).toBeUndefined();
    for (const [query, param] of [
      ['identity=agent-character_x', 'identity'],
      ['identity=Agent-x', 'identity'],
      ['identity=', 'identity'],
      [`identity=${'p'.repeat(129)}`, 'identity'],
      ['identity=two%20words', 'identity'],
      [`name=${'n'.repeat(129)}`, 'name'],
      ['name=%20', 'name'],
      ['room=elsewhere', 'room'],
    ] as const) {
      const res = await api.get(`/v1/rooms/${room.id}/token?${query}`).expect(400);
      expect(res.error).toMatchObject({ type: 'invalid_request_error', param });
    }
    const reserved = await api.get(`/v1/rooms/${room.id}/token?identity=agent-x`).expect(400);
    expect(reserved.error.message).toContain('reserved for characters');
  });

  it('refuses tokens for ended (409), foreign and unknown rooms (404)', async () => {
    const room = await newRoom();
    expect((await other.get(`/v1/rooms/${room.id}/token`).expect(404)).error.code).toBe('room_not_found');
    await api.get('/v1/rooms/room_nope/token').expect(404);
    await api.post(`/v1/rooms/${room.id}/end`).expect(200);
    expect((await api.get(`/v1/rooms/${room.id}/token`).expect(409)).error.code).toBe('room_ended');
  });

  it('refuses to start a room without participants (400), an ended one (409) and a foreign one (404)', async () => {
    const empty = await newRoom();
    const res = await api.post(`/v1/rooms/${empty.id}/start`).expect(400);
    expect(res.error).toMatchObject({ type: 'invalid_request_error', code: 'room_has_no_participants' });
    const left = await newRoom('mira');
    await api.delete(`/v1/rooms/${left.id}/participants/${cast.mira.id}`).expect(200);
    await api.post(`/v1/rooms/${left.id}/start`).expect(400);
    await other.post(`/v1/rooms/${left.id}/start`).expect(404);
    await api.post(`/v1/rooms/${left.id}/end`).expect(200);
    expect((await api.post(`/v1/rooms/${left.id}/start`).expect(409)).error.code).toBe('room_ended');
    expect(callsTo('CreateRoom', empty.id).length + callsTo('CreateRoom', left.id).length).toBe(0);
  });

  it('starts: creates the LiveKit room and dispatches one agent per active participant, once', async () => {
    const room = await newRoom('mira', 'rook', 'nell');
    await api.delete(`/v1/rooms/${room.id}/participants/${cast.nell.id}`).expect(200);
    expect(await api.post(`/v1/rooms/${room.id}/start`).expect(200)).toEqual({ started: true });
    expect(callsTo('CreateRoom', room.id)).toHaveLength(1);
    expect(fake.rooms.get(room.id)?.metadata).toBe(JSON.stringify({ projectId, roomId: room.id }));
    const after = await stored(room.id);
    expect(after.startedAt).not.toBeNull();
    const active = after.participants.filter((p) => p.leftAt === null);
    const dispatches = dispatchesOf(room.id);
    expect(dispatches).toHaveLength(2);
    for (const p of active) {
      const dispatch = dispatches.find((d) => d.id === p.dispatchId);
      expect(dispatch?.agentName).toBe(AGENT_NAME);
      const character = Object.values(cast).find((c) => c.id === p.characterId);
      expect(JSON.parse(dispatch?.metadata ?? '')).toEqual({
        projectId,
        roomId: room.id,
        participantId: p.id,
        characterId: p.characterId,
        conversationId: p.conversationId,
        // What the agent joins as and speaks with.
        characterName: character?.name,
        voiceId: null,
        voiceDescription: null,
      });
    }
    expect(after.participants.find((p) => p.characterId === cast.nell.id)?.dispatchId).toBeNull();
    // Again: nobody is dispatched twice.
    expect(await api.post(`/v1/rooms/${room.id}/start`).expect(200)).toEqual({ started: true });
    expect(callsTo('CreateDispatch', room.id)).toHaveLength(2);
    expect((await stored(room.id)).participants.map((p) => p.dispatchId)).toEqual(after.participants.map((p) => p.dispatchId));
  });

  it('completes a start that stopped half-way: stored and unrecorded dispatches are not made again', async () => {
    const room = await newRoom('mira', 'rook', 'nell');
    const [mira, rook, nell] = (await stored(room.id)).participants;
    const plane = new LiveKitControlPlane({ config: t.server.resources.config.livekit });
    // Mira's dispatch was stored; Rook's was made but its id never stored (a crash in between).
    const miraDispatch = await plane.dispatchAgent(room.id, { participantId: mira?.id });
    await t.server.resources.rooms.setDispatchId(mira?.id ?? '', miraDispatch);
    const rookDispatch = await plane.dispatchAgent(room.id, { participantId: rook?.id });
    const made = callsTo('CreateDispatch', room.id).length;
    await api.post(`/v1/rooms/${room.id}/start`).expect(200);
    expect(callsTo('CreateDispatch', room.id)).toHaveLength(made + 1);
    const after = await stored(room.id);
    expect(after.participants.map((p) => p.dispatchId)).toEqual([miraDispatch, rookDispatch, expect.stringMatching(/^AD_/)]);
    expect(JSON.parse(fake.dispatches.get(after.participants[2]?.dispatchId ?? '')?.metadata ?? '')).toMatchObject({ participantId: nell?.id });
  });

  it('dispatches a participant added to a started room at once, and withdraws a removed one', async () => {
    const room = await newRoom('mira');
    await api.post(`/v1/rooms/${room.id}/start`).expect(200);
    const rook = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: cast.rook.id }).expect(201);
    const dispatchId = (await stored(room.id)).participants.find((p) => p.id === rook.id)?.dispatchId;
    expect(fake.dispatches.get(dispatchId ?? '')).toMatchObject({ agentName: AGENT_NAME, room: room.id });
    expect(JSON.parse(fake.dispatches.get(dispatchId ?? '')?.metadata ?? '')).toMatchObject({ participantId: rook.id, characterId: cast.rook.id });
    fake.addParticipant(room.id, rook.rtcIdentity, { kind: 'AGENT' }); // its agent joined
    await api.delete(`/v1/rooms/${room.id}/participants/${cast.rook.id}`).expect(200);
    expect(callsTo('DeleteDispatch', room.id).map((c) => c.body.dispatchId)).toEqual([dispatchId]);
    expect(callsTo('RemoveParticipant', room.id).map((c) => c.body.identity)).toEqual([`agent-${cast.rook.id}`]);
    expect(fake.dispatches.has(dispatchId ?? '')).toBe(false);
    expect(fake.rooms.get(room.id)?.participants.has(rook.rtcIdentity)).toBe(false);
    expect((await stored(room.id)).participants.find((p) => p.id === rook.id)?.dispatchId).toBeNull();
  });

  it('ends a started room: every remaining agent is withdrawn and the LiveKit room deleted', async () => {
    const room = await newRoom('mira', 'rook');
    await api.post(`/v1/rooms/${room.id}/start`).expect(200);
    const dispatchIds = (await stored(room.id)).participants.map((p) => p.dispatchId);
    await api.post(`/v1/rooms/${room.id}/end`).expect(200);
    expect(callsTo('DeleteDispatch', room.id).map((c) => c.body.dispatchId)).toEqual(dispatchIds);
    expect(callsTo('RemoveParticipant', room.id).map((c) => c.body.identity)).toEqual([`agent-${cast.mira.id}`, `agent-${cast.rook.id}`]);
    expect(callsTo('DeleteRoom', room.id)).toHaveLength(1);
    expect(fake.rooms.has(room.id)).toBe(false);
    // A room never started was never created in LiveKit: ending it calls nothing.
    const quiet = await newRoom('mira');
    await api.post(`/v1/rooms/${quiet.id}/end`).expect(200);
    expect(fake.calls.filter((c) => c.body.room === quiet.id || c.body.name === quiet.id)).toEqual([]);
  });

  it("answers 502 with LiveKit's message when LiveKit fails, and changes nothing", async () => {
    const room = await newRoom('mira');
    fake.failNext({ code: 'unavailable', msg: 'livekit is overloaded' });
    const start = await api.post(`/v1/rooms/${room.id}/start`).expect(502);
    expect(start.error).toMatchObject({ type: 'api_error', code: 'livekit_error' });
    expect(start.error.message).toContain('livekit is overloaded');
    expect(await stored(room.id)).toMatchObject({ startedAt: null, participants: [{ dispatchId: null }] });
    await api.post(`/v1/rooms/${room.id}/start`).expect(200);

    const before = await api.get(`/v1/rooms/${room.id}`).expect(200);
    fake.failNext({ msg: 'dispatch refused' });
    expect((await api.post(`/v1/rooms/${room.id}/participants`, { characterId: cast.rook.id }).expect(502)).error.message).toContain('dispatch refused');
    expect(await api.get(`/v1/rooms/${room.id}`).expect(200)).toEqual(before);
    const rook = await api.post(`/v1/rooms/${room.id}/participants`, { characterId: cast.rook.id }).expect(201);

    fake.failNext({ msg: 'cannot remove' });
    expect((await api.delete(`/v1/rooms/${room.id}/participants/${cast.rook.id}`).expect(502)).error.message).toContain('cannot remove');
    expect((await stored(room.id)).participants.find((p) => p.id === rook.id)).toMatchObject({ leftAt: null, dispatchId: expect.stringMatching(/^AD_/) });
    await api.delete(`/v1/rooms/${room.id}/participants/${cast.rook.id}`).expect(200);

    fake.failNext({ msg: 'cannot end' });
    expect((await api.post(`/v1/rooms/${room.id}/end`).expect(502)).error.message).toContain('cannot end');
    expect((await stored(room.id)).endedAt).toBeNull();
    await api.post(`/v1/rooms/${room.id}/end`).expect(200);
    expect(fake.rooms.has(room.id)).toBe(false);
  });

  it('ends the room on a signed room_finished webhook, once, and ignores rooms it does not know', async () => {
    const room = await newRoom('mira');
    await api.post(`/v1/rooms/${room.id}/start`).expect(200);
    const hook = await fake.webhook('room_finished', room.id);
    const post = (h: { body: string; authorization: string; contentType: string }) =>
      t.client(null).post('/v1/livekit/webhook', h.body, { authorization: h.authorization, 'content-type': h.contentType });
    expect(await post(hook).expect(200)).toEqual({ received: true });
    expect((await api.get(`/v1/rooms/${room.id}`).expect(200)).endedAt).not.toBeNull();
    await post(await fake.webhook('room_finished', room.id)).expect(200); // LiveKit's retry
    await post(await fake.webhook('room_finished', 'room_00000000000000000000000000')).expect(200);
    await post(await fake.webhook('participant_joined', 'someone-elses-room', 'player-9')).expect(200);
  });

  it('refuses webhooks LiveKit did not sign with 401', async () => {
    const room = await newRoom();
    const hook = await fake.webhook('room_finished', room.id);
    const webhook = t.client(null);
    const forged = await fake.signWebhook(hook.body, { apiSecret: 'another-secret-another-secret-another' });
    for (const authorization of [forged, 'not-a-jwt', await fake.signWebhook('{"event":"room_started"}')]) {
      const res = await webhook.post('/v1/livekit/webhook', hook.body, { authorization, 'content-type': hook.contentType }).expect(401);
      expect(res.error.code).toBe('invalid_webhook_signature');
    }
    await webhook.post('/v1/livekit/webhook', hook.body, { 'content-type': hook.contentType }).expect(401);
    expect((await api.get(`/v1/rooms/${room.id}`).expect(200)).endedAt).toBeNull();
  });

  it('reports humans joining and leaving (log and onHuman), not agents; calls onStarted after a start', async () => {
    const room = await newRoom('mira');
    const post = async (event: string, identity: string) => {
      const h = await fake.webhook(event, room.id, identity);
      await t.client(null).post('/v1/livekit/webhook', h.body, { authorization: h.authorization, 'content-type': h.contentType }).expect(200);
    };
    await post('participant_joined', 'player-7');
    await post('participant_joined', `agent-${cast.mira.id}`);
    const presence = t.logs.filter((l) => l.msg === 'voice room human presence' && l.roomId === room.id);
    expect(presence).toEqual([expect.objectContaining({ identity: 'player-7', change: 'joined' })]);

    const humans: [string, HumanPresence][] = [];
    const started: StoredRoom[] = [];
    const { resources } = t.server;
    const control = new RoomVoiceControl({
      rooms: resources.rooms,
      livekit: new LiveKitControlPlane({ config: resources.config.livekit }),
      webhooks: new LiveKitWebhooks({ config: resources.config.livekit }),
      logger: resources.logger,
      hooks: { onHuman: async (roomId, event) => void humans.push([roomId, event]), onStarted: async (r) => void started.push(r) },
    });
    fake.addParticipant(room.id, 'player-8', { name: 'Bo' });
    for (const event of ['participant_joined', 'participant_left']) {
      const h = await fake.webhook(event, room.id, 'player-8');
      await control.receiveWebhook(h.body, h.authorization);
    }
    expect(humans).toEqual([
      [room.id, { change: 'joined', identity: 'player-8', name: 'Bo' }],
      [room.id, { change: 'left', identity: 'player-8', name: 'Bo' }],
    ]);
    expect(await control.start(projectId, room.id)).toEqual({ started: true });
    expect(started).toEqual([expect.objectContaining({ id: room.id, startedAt: expect.any(String) })]);
  });

  it('documents the voice endpoints in /openapi.json', async () => {
    const doc = await t.client(null).get('/openapi.json').expect(200);
    const token = doc.paths['/v1/rooms/{roomId}/token'].get;
    expect(token.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['roomId', 'identity', 'name']));
    expect(Object.keys(doc.paths['/v1/rooms/{roomId}/start'].post.responses)).toEqual(expect.arrayContaining(['200', '400', '404', '409', '502', '503']));
    const webhook = doc.paths['/v1/livekit/webhook'].post;
    expect(webhook.security).toBeUndefined();
    expect(Object.keys(webhook.responses)).toContain('401');
  });
});

describe.each(BACKENDS)('rooms without LiveKit on $kind', (backend) => {
  let t: TestServer;
  let api: ApiClient;

  beforeAll(async () => {
    t = await startTestServer(backend);
    api = (await t.newProject()).client;
  });
  afterAll(() => t?.close());

  it('answers 503 naming the variables on token, start and the webhook; every other room endpoint works', async () => {
    const mira = await api.post('/characters', { name: 'Mira' }).expect(201);
    const room = await api.post('/v1/rooms', { name: 'Quiet' }).expect(201);
    await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    expect((await api.get('/v1/rooms').expect(200)).map((r: { id: string }) => r.id)).toContain(room.id);
    for (const res of [await api.get(`/v1/rooms/${room.id}/token`).expect(503), await api.post(`/v1/rooms/${room.id}/start`).expect(503)]) {
      expect(res.error).toMatchObject({ type: 'api_error', code: 'livekit_not_configured' });
      for (const variable of ['LIVEKIT_URL', 'LIVEKIT_API_KEY', 'LIVEKIT_API_SECRET']) expect(res.error.message).toContain(variable);
    }
    await t.client(null).post('/v1/livekit/webhook', '{}', { authorization: 'x' }).expect(503);
    await api.delete(`/v1/rooms/${room.id}/participants/${mira.id}`).expect(200);
    await api.post(`/v1/rooms/${room.id}/participants`, { characterId: mira.id }).expect(201);
    await api.post(`/v1/rooms/${room.id}/end`).expect(200);
  });
});
