import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createTempDatabase } from '../support/databases.ts';
import { ApiClient } from '../support/client.ts';
import { BACKENDS, HTTP_ENGINE, POSTGRES_URL, REDIS_URL, type Backend } from '../support/env.ts';
import { spawnTroupe, type TroupeProcess } from '../support/process.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/openai/fake-upstream.ts';
import { createStorage, startTestServer, type TestServer } from '../support/server.ts';
import { openSocket } from '../support/ws-client.ts';

const KEY = 'sk-troupe-outages_redis_key_000001';

/** A bound on a wait that must not hang, with room for a loaded machine; not a speed target. */
const PROMPTLY_MS = 6_000;

/** PostgreSQL behind a proxy the test cuts: answers stay prompt and explicit, never hang or 500. */
describe.skipIf(!POSTGRES_URL)('a PostgreSQL outage', () => {
  let proxy: FaultProxy;
  let upstream: FakeUpstream;
  let t: TestServer;
  let key: string;
  let conversationId: string;

  beforeAll(async () => {
    const db = await createTempDatabase(POSTGRES_URL as string);
    const u = new URL(db.url);
    proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 5432) });
    upstream = await startFakeUpstream();
    t = await startTestServer(
      { kind: 'postgres', url: POSTGRES_URL as string, vectors: false },
      {
        storage: { env: { DATABASE_URL: proxy.via(db.url) }, dispose: db.drop },
        env: { INFERENCE_BASE_URL: upstream.url, INFERENCE_MODEL: 'fake-chat-1', INFERENCE_MAX_RETRIES: '0', DATABASE_CONNECT_TIMEOUT_MS: '1000', DATABASE_ACQUIRE_TIMEOUT_MS: '1000', DATABASE_POOL_SIZE: '2' },
      },
    );
    ({ key } = await t.newProject());
    const character = await t.client(key).post('/characters', { name: 'Sentinel' }).expect(201);
    conversationId = (await t.client(key).post('/conversations', { characterId: character.id }).expect(201)).id;
  });
  afterAll(async () => {
    await proxy?.restore();
    await t?.close();
    await upstream?.close();
    await proxy?.close();
  });

  const timed = async <T>(work: () => PromiseLike<T>): Promise<{ value: T; ms: number }> => {
    const started = performance.now();
    const value = await work();
    return { value, ms: performance.now() - started };
  };

  it.each(['reset', 'blackhole'] as const)('answers 503 database_unavailable with Retry-After promptly while the server is %s, and recovers', async (mode) => {
    const api = t.client(key);
    await api.get('/characters').expect(200);
    await proxy.cut(mode);
    try {
      const ready = await timed(() => api.get('/readyz'));
      expect(ready.value.status).toBe(503);
      expect(ready.value.body.error.code).toBe('database_unavailable');
      expect(ready.ms).toBeLessThan(PROMPTLY_MS);

      const read = await timed(() => api.get('/characters'));
      expect(read.value.status, read.value.text).toBe(503);
      expect(read.value.body.error).toMatchObject({ type: 'api_error', code: 'database_unavailable' });
      expect(read.value.headers.get('retry-after')).toBe('2');
      expect(read.ms).toBeLessThan(PROMPTLY_MS);

      const write = await api.post(`/conversations/${conversationId}/messages`, { content: 'anyone?' });
      expect(write.status).toBe(503);
    } finally {
      await proxy.restore();
    }
    await api.get('/readyz').expect(200);
    await api.get('/characters').expect(200);
  });

  // postgres.js fails one queued query per failed connection attempt: without an acquire
  // deadline the last of 30 requests on a 2-connection pool waited about 15 connect timeouts.
  it('answers a burst queued behind more requests than connections within the acquire timeout', async () => {
    const api = t.client(key);
    await proxy.cut('blackhole');
    try {
      const burst = await Promise.all(Array.from({ length: 30 }, () => timed(() => api.get(`/conversations/${conversationId}`))));
      for (const { value, ms } of burst) {
        expect(value.status, value.text).toBe(503);
        expect(value.body.error.code).toBe('database_unavailable');
        expect(ms).toBeLessThan(PROMPTLY_MS);
      }
    } finally {
      await proxy.restore();
    }
    await api.get(`/conversations/${conversationId}`).expect(200);
  });

  // A message stored before the cut whose reply could not be stored: the sender got a 503, and
  // its retry with the same Idempotency-Key is answered without storing the message again.
  it('answers the retry of a message whose reply was cut off, storing the message once', async () => {
    const api = t.client(key);
    const id = (await api.post('/conversations', { characterId: (await api.get(`/conversations/${conversationId}`).expect(200)).characterId }).expect(201)).id;
    upstream.script({ text: 'Still there? Good.', chunkDelayMs: 60 });
    const sent = api.post(`/conversations/${id}/messages`, { content: 'the lights flicker' }, { 'idempotency-key': 'flicker-1' });
    for (;;) {
      const request = await upstream.nextRequest();
      if (JSON.stringify(request.body).includes('the lights flicker')) break;
    }
    await proxy.cut('reset');
    try {
      const cutOff = await sent;
      expect(cutOff.status, cutOff.text).toBe(503);
      expect(cutOff.body.error.code).toBe('database_unavailable');
    } finally {
      await proxy.restore();
    }
    upstream.script({ text: 'Still there? Good.' });
    const retried = await api.post(`/conversations/${id}/messages`, { content: 'the lights flicker' }, { 'idempotency-key': 'flicker-1' }).expect(200);
    expect(retried.characterMessage.content).toBe('Still there? Good.');
    const stored = await api.get(`/conversations/${id}`).expect(200);
    expect(stored.messages.map((m: { content: string }) => m.content)).toEqual(['the lights flicker', 'Still there? Good.']);
  });

  it('tells a WebSocket sender its message was not stored while the database is down', async () => {
    const socket = await openSocket(`${t.url.replace('http://', 'ws://')}/conversations/${conversationId}/ws?token=${key}`);
    await socket.next('ready');
    await proxy.cut('reset');
    try {
      socket.send({ content: 'hello in the dark' });
      expect(await socket.next('error')).toMatchObject({ type: 'error', code: 'database_unavailable' });
    } finally {
      await proxy.restore();
    }
    upstream.script({ text: 'Back again.' });
    socket.send({ content: 'hello again' });
    expect(await socket.reply()).toBe('Back again.');
    const stored = await t.client(key).get(`/conversations/${conversationId}`).expect(200);
    expect(stored.messages.map((m: { content: string }) => m.content)).toEqual(['hello again', 'Back again.']);
    await socket.close();
  });
});

/** Redis behind a proxy the test cuts, under a real Troupe process whose output is read. */
describe.skipIf(!REDIS_URL)('a Redis outage', () => {
  let proxy: FaultProxy;
  let upstream: FakeUpstream;
  let troupe: TroupeProcess;
  let api: ApiClient;
  let characterId: string;

  beforeAll(async () => {
    const u = new URL(REDIS_URL as string);
    proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 6379) });
    upstream = await startFakeUpstream();
    const storage = await createStorage(BACKENDS[0] as Backend);
    troupe = await spawnTroupe({
      ...storage.env,
      HTTP_ENGINE,
      LOG_LEVEL: 'info',
      REDIS_URL: proxy.via(REDIS_URL as string),
      TROUPE_BOOTSTRAP_KEY: KEY,
      INFERENCE_BASE_URL: upstream.url,
      INFERENCE_MODEL: 'fake-chat-1',
      INFERENCE_MAX_RETRIES: '0',
    });
    disposeStorage = storage.dispose;
    api = new ApiClient(troupe.url, KEY);
    characterId = (await api.post('/characters', { name: 'Lamplighter' }).expect(201)).id;
  });
  let disposeStorage: () => Promise<void> = async () => {};
  afterAll(async () => {
    await proxy?.restore();
    await troupe?.stop();
    await upstream?.close();
    await proxy?.close();
    await disposeStorage();
  });

  it('answers 503 redis_unavailable promptly, keeps local actors answering, logs only JSON, and recovers', async () => {
    const warm = (await api.post('/conversations', { characterId }).expect(201)).id;
    await api.post(`/conversations/${warm}/messages`, { content: 'before' }).expect(200);
    const socket = await openSocket(`${troupe.url.replace('http://', 'ws://')}/conversations/${warm}/ws?token=${KEY}`);
    await socket.next('ready');
    await proxy.cut('reset');
    try {
      const ready = await api.get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.error.code).toBe('redis_unavailable');
      // A conversation whose actor runs here keeps answering its HTTP callers, and its sockets
      // here get every event of the reply, named by its reply id, without Redis.
      upstream.script({ text: 'Lamps lit, every one.' });
      await api.post(`/conversations/${warm}/messages`, { content: 'during' }).expect(200);
      const chunks: Record<string, unknown>[] = [];
      for (let event = await socket.next('chunk'); ; event = await socket.next('chunk')) {
        chunks.push(event);
        if (event.done === true) break;
      }
      expect(chunks.map((c) => c.content).join('')).toBe('Lamps lit, every one.');
      expect(new Set(chunks.map((c) => c.replyId)).size).toBe(1);
      expect(String(chunks[0]?.replyId)).toMatch(/^reply_/);
      // One whose actor must be found or made through Redis cannot be, and says so.
      const cold = (await api.post('/conversations', { characterId }).expect(201)).id;
      const refused = await api.post(`/conversations/${cold}/messages`, { content: 'cold' });
      expect(refused.status, refused.text).toBe(503);
      expect(refused.body.error.code).toBe('redis_unavailable');
      expect(refused.headers.get('retry-after')).toBe('2');
    } finally {
      await proxy.restore();
    }
    await troupe.waitForOutput(/"msg":"redis connection restored"/);
    await api.get('/readyz').expect(200);
    const after = (await api.post('/conversations', { characterId }).expect(201)).id;
    await api.post(`/conversations/${after}/messages`, { content: 'after' }).expect(200);
    await socket.close();
    // Every line the process wrote is JSON: no "[ioredis] Unhandled error event" text.
    const lines = [...troupe.stdout().split('\n'), ...troupe.stderr().split('\n')].filter((line) => line.trim() !== '');
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  });
});

/** Two processes, Redis behind a proxy: a socket fed from the other process is told, not starved. */
describe.skipIf(!POSTGRES_URL || !REDIS_URL)('a Redis outage between two processes', () => {
  it("tells a socket whose conversation's actor runs on the other process, then closes it with 1013", async () => {
    const u = new URL(REDIS_URL as string);
    const proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 6379) });
    onTestFinished(() => proxy.close());
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const db = await createTempDatabase(POSTGRES_URL as string);
    onTestFinished(() => db.drop());
    const env = { DATABASE_URL: db.url, REDIS_URL: proxy.via(REDIS_URL as string), HTTP_ENGINE, TROUPE_BOOTSTRAP_KEY: KEY, INFERENCE_BASE_URL: upstream.url, INFERENCE_MODEL: 'fake-chat-1' };
    const [a, b] = await Promise.all([spawnTroupe(env), spawnTroupe(env)]);
    onTestFinished(async () => void (await Promise.all([a.stop(), b.stop()])));
    const apiA = new ApiClient(a.url, KEY);
    const character = await apiA.post('/characters', { name: 'Ferryman' }).expect(201);
    const id = (await apiA.post('/conversations', { characterId: character.id }).expect(201)).id;
    await apiA.post(`/conversations/${id}/messages`, { content: 'the actor lives on A' }).expect(200);
    const socket = await openSocket(`${b.url.replace('http://', 'ws://')}/conversations/${id}/ws?token=${KEY}`);
    await socket.next('ready');
    const closed = new Promise<number>((resolve) => socket.ws.once('close', (code) => resolve(code)));
    await proxy.cut('reset');
    expect(await socket.next('error')).toMatchObject({ code: 'redis_unavailable' });
    expect(await closed).toBe(1013);
    await proxy.restore();
  });
});
