import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TokenVerifier } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveKitConfig } from '../../src/config.ts';
import { TroupeError } from '../../src/errors.ts';
import { LiveKitControlPlane } from '../../src/livekit/control-plane.ts';
import { LiveKitWebhooks } from '../../src/livekit/webhooks.ts';
import { startFakeLiveKit, type FakeLiveKit } from '../support/fake-livekit.ts';

let fake: FakeLiveKit;
let config: LiveKitConfig;
let plane: LiveKitControlPlane;

beforeAll(async () => {
  fake = await startFakeLiveKit();
  config = { url: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret, agentName: 'troupe-character', tokenTtlS: 900, agents: 'off', troupeUrl: 'http://127.0.0.1:8080' };
  plane = new LiveKitControlPlane({ config });
});
afterAll(() => fake.close());

/** The TroupeError a promise rejects with (fails the test if it resolves or throws anything else). */
async function failure(promise: Promise<unknown>): Promise<TroupeError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TroupeError);
  return err as TroupeError;
}

function lastCall(method: string) {
  const call = fake.calls.findLast((c) => c.method === method);
  if (!call) throw new Error(`no ${method} call reached the fake`);
  return call;
}

describe('joinToken', () => {
  it('signs a token that joins one room with a microphone and nothing else', async () => {
    const before = fake.calls.length;
    const { token, url } = await plane.joinToken('room-a', 'player-1', 'Ada');
    expect(url).toBe(fake.url);
    expect(fake.calls.length).toBe(before); // signed locally

    const claims = await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(token);
    expect(Object.keys(claims).sort()).toEqual(['exp', 'iss', 'name', 'nbf', 'sub', 'video']);
    expect(claims).toMatchObject({ iss: fake.apiKey, sub: 'player-1', name: 'Ada' });
    expect(claims.video).toEqual({
      room: 'room-a',
      roomJoin: true,
      canPublish: true,
      canPublishSources: ['microphone'],
      canSubscribe: true,
      canPublishData: true,
    });
    expect((claims.exp ?? 0) - (claims.nbf ?? 0)).toBe(900);
  });

  it('leaves the name out when none is given, and refuses tokens of another secret', async () => {
    const { token } = await plane.joinToken('room-a', 'player-2');
    const claims = await new TokenVerifier(fake.apiKey, fake.apiSecret).verify(token);
    expect(claims.name).toBeUndefined();
    await expect(new TokenVerifier(fake.apiKey, 'another-secret-another-secret-xx').verify(token)).rejects.toThrow();
  });
});

describe('server calls', () => {
  it('creates a room with a CreateRoom call holding only roomCreate, and again returns the same room', async () => {
    const room = await plane.createRoom('room-create', { projectId: 'p1' });
    expect(room).toMatchObject({ name: 'room-create', metadata: '{"projectId":"p1"}', numParticipants: 0 });
    expect(room.sid).toMatch(/^RM_/);
    const call = lastCall('CreateRoom');
    expect(call).toMatchObject({ service: 'RoomService', body: { name: 'room-create', metadata: '{"projectId":"p1"}' } });
    expect(call.grants?.video).toEqual({ roomCreate: true });
    expect((await plane.createRoom('room-create')).sid).toBe(room.sid);
  });

  it('dispatches the configured agent with JSON metadata, lists and deletes the dispatch', async () => {
    const id = await plane.dispatchAgent('room-dispatch', { characterId: 'ch_1' });
    expect(id).toMatch(/^AD_/);
    const call = lastCall('CreateDispatch');
    expect(call).toMatchObject({
      service: 'AgentDispatchService',
      body: { room: 'room-dispatch', agentName: 'troupe-character', metadata: '{"characterId":"ch_1"}' },
    });
    expect(call.grants?.video).toEqual({ roomAdmin: true, room: 'room-dispatch' });

    expect(await plane.listDispatches('room-dispatch')).toEqual([{ id, agentName: 'troupe-character', room: 'room-dispatch', metadata: '{"characterId":"ch_1"}' }]);
    expect(lastCall('ListDispatch').body).toEqual({ room: 'room-dispatch' });

    await plane.deleteDispatch(id, 'room-dispatch');
    expect(lastCall('DeleteDispatch').body).toEqual({ dispatchId: id, room: 'room-dispatch' });
    expect(fake.dispatches.has(id)).toBe(false);
    // Gone already: LiveKit answers not_found, which counts as deleted.
    const calls = fake.calls.length;
    await plane.deleteDispatch(id, 'room-dispatch');
    expect(fake.calls.length).toBe(calls + 1);
  });

  it('lists and removes participants; one LiveKit does not know counts as removed', async () => {
    await plane.createRoom('room-people');
    fake.addParticipant('room-people', 'player-1', { name: 'Ada' });
    fake.addParticipant('room-people', 'agent-ch_1', { kind: 'AGENT' });
    const people = await plane.listParticipants('room-people');
    expect(people.map(({ identity, name, kind }) => ({ identity, name, kind }))).toEqual([
      { identity: 'player-1', name: 'Ada', kind: 'standard' },
      { identity: 'agent-ch_1', name: '', kind: 'agent' },
    ]);

    await plane.removeParticipant('room-people', 'player-1');
    const call = lastCall('RemoveParticipant');
    expect(call.body).toEqual({ room: 'room-people', identity: 'player-1' });
    expect(call.grants?.video).toEqual({ roomAdmin: true, room: 'room-people' });
    expect(fake.rooms.get('room-people')?.participants.has('player-1')).toBe(false);

    await plane.removeParticipant('room-people', 'player-1');
    await plane.removeParticipant('no-such-room', 'player-1');
    expect(fake.calls.filter((c) => c.method === 'RemoveParticipant')).toHaveLength(3);
  });

  it('deletes a room, and a room already gone counts as deleted', async () => {
    await plane.createRoom('room-delete');
    await plane.deleteRoom('room-delete');
    expect(lastCall('DeleteRoom')).toMatchObject({ body: { room: 'room-delete' }, grants: { video: { roomCreate: true } } });
    expect(fake.rooms.has('room-delete')).toBe(false);
    await plane.deleteRoom('room-delete');
  });
});

describe('failures', () => {
  it.each([
    [{ url: undefined, apiKey: undefined, apiSecret: undefined }, 'LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET'],
    [{ apiKey: undefined, apiSecret: undefined }, 'LIVEKIT_API_KEY, LIVEKIT_API_SECRET'],
    [{ apiSecret: undefined }, 'LIVEKIT_API_SECRET'],
    [{ url: undefined }, 'LIVEKIT_URL'],
  ])('without %o every method answers 503 naming %s', async (unset, names) => {
    const unconfigured = new LiveKitControlPlane({ config: { ...config, ...unset } });
    expect(unconfigured.configured).toBe(false);
    const before = fake.calls.length;
    for (const attempt of [
      () => unconfigured.joinToken('r', 'p'),
      () => unconfigured.createRoom('r'),
      () => unconfigured.deleteRoom('r'),
      () => unconfigured.dispatchAgent('r', {}),
      () => unconfigured.listDispatches('r'),
      () => unconfigured.deleteDispatch('d', 'r'),
      () => unconfigured.listParticipants('r'),
      () => unconfigured.removeParticipant('r', 'p'),
    ]) {
      const err = await failure(attempt());
      expect(err).toMatchObject({ status: 503, code: 'livekit_not_configured' });
      expect(err.message).toBe(`Voice rooms are not configured: set ${names}.`);
    }
    expect(fake.calls.length).toBe(before);
  });

  it("answers 502 with LiveKit's own message when LiveKit fails", async () => {
    fake.failNext({ code: 'internal', msg: 'room allocator exploded' });
    const err = await failure(plane.createRoom('room-fail'));
    expect(err).toMatchObject({ status: 502, code: 'livekit_error' });
    expect(err.message).toBe('LiveKit CreateRoom failed (internal): room allocator exploded');
    expect(fake.rooms.has('room-fail')).toBe(false);
  });

  it('does not take not_found for success where it means failure', async () => {
    fake.failNext({ code: 'not_found', msg: 'requested room does not exist' });
    const err = await failure(plane.dispatchAgent('room-x', {}));
    expect(err).toMatchObject({ status: 502, code: 'livekit_error', message: 'LiveKit CreateDispatch failed (not_found): requested room does not exist' });
  });

  it('answers 502 when LiveKit refuses our credentials', async () => {
    const wrongSecret = new LiveKitControlPlane({ config: { ...config, apiSecret: 'not-the-secret-livekit-knows-xxxx' } });
    const err = await failure(wrongSecret.createRoom('room-auth'));
    expect(err).toMatchObject({ status: 502, code: 'livekit_error', message: 'LiveKit CreateRoom failed (unauthenticated): invalid token' });
    expect(lastCall('CreateRoom')).toMatchObject({ body: { name: 'room-auth' }, grants: null });
  });

  it('answers 502 when LiveKit refuses connections', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const refused = new LiveKitControlPlane({ config: { ...config, url: `ws://127.0.0.1:${port}` } });
    const err = await failure(refused.createRoom('room-refused'));
    expect(err).toMatchObject({ status: 502, code: 'livekit_error', detailCode: 'livekit_unreachable' });
    expect(err.message).toBe(`LiveKit at 127.0.0.1:${port} is unreachable (ECONNREFUSED); check LIVEKIT_URL.`);
  });

  it('answers 502 when LiveKit does not answer within the bound', async () => {
    const impatient = new LiveKitControlPlane({ config, requestTimeoutMs: 200 });
    fake.hangNext();
    const err = await failure(impatient.dispatchAgent('room-slow', {}));
    expect(err).toMatchObject({ status: 502, code: 'livekit_error', detailCode: 'livekit_timeout' });
    expect(err.message).toMatch(/did not answer CreateDispatch within 200 ms/);
  });
});

describe('webhooks', () => {
  it('returns the verified event', async () => {
    const webhooks = new LiveKitWebhooks({ config });
    fake.addParticipant('room-hook', 'player-1', { name: 'Ada' });
    const { body, authorization } = await fake.webhook('participant_joined', 'room-hook', 'player-1');
    const event = await webhooks.receive(body, authorization);
    expect(event).toMatchObject({
      event: 'participant_joined',
      room: { name: 'room-hook', sid: fake.rooms.get('room-hook')?.sid },
      participant: { identity: 'player-1', name: 'Ada', kind: 'standard' },
    });
    expect(event.id).toMatch(/^EV_/);
    expect(event.createdAtS).toBeGreaterThan(0);
    // A proxy that added the usual scheme does not break it.
    expect((await webhooks.receive(body, `Bearer ${authorization}`)).event).toBe('participant_joined');
  });

  it('refuses a bad signature, a changed body and a missing header with 401', async () => {
    const webhooks = new LiveKitWebhooks({ config });
    const { body, authorization } = await fake.webhook('room_finished', 'room-hook');
    const forged = await fake.signWebhook(body, { apiSecret: 'someone-else-s-secret-xxxxxxxxxxx' });
    const otherKey = await fake.signWebhook(body, { apiKey: 'someone-else' });
    for (const [body_, header] of [
      [body, forged],
      [body, otherKey],
      [body.replace('room_finished', 'room_started'), authorization],
      [body, undefined],
      [body, 'not-a-jwt'],
    ] as const) {
      expect(await failure(webhooks.receive(body_, header))).toMatchObject({ status: 401, code: 'invalid_webhook_signature' });
    }
  });

  it('answers 400 for a signed body that is not a webhook event', async () => {
    const webhooks = new LiveKitWebhooks({ config });
    for (const body of ['not json', '{"event": 42}', '{}']) {
      const err = await failure(webhooks.receive(body, await fake.signWebhook(body)));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', detailCode: 'invalid_webhook_body' });
    }
  });

  it('answers 503 without the API key and secret', async () => {
    const webhooks = new LiveKitWebhooks({ config: { ...config, url: undefined, apiSecret: undefined } });
    const err = await failure(webhooks.receive('{}', 'x'));
    expect(err).toMatchObject({ status: 503, code: 'livekit_not_configured', message: 'Voice rooms are not configured: set LIVEKIT_API_SECRET.' });
  });
});
