import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ApiClient } from '../support/client.ts';
import { BACKENDS, HTTP_ENGINE } from '../support/env.ts';
import { runTroupeExpectingFailure, spawnTroupe } from '../support/process.ts';
import { ADMIN_TOKEN, createStorage, startTestServer } from '../support/server.ts';
import { openSocket } from '../support/ws-client.ts';

describe.each(BACKENDS)('process lifecycle on $kind', (backend) => {
  it('keeps everything across a stop and start on the same storage, and prints the first key once', async () => {
    const storage = await createStorage(backend);
    const env = { ...storage.env, HTTP_ENGINE, TROUPE_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'info' };
    try {
      const first = await spawnTroupe(env);
      const key = /sk-troupe-[A-Za-z0-9_-]+/.exec(first.stdout())?.[0];
      expect(key).toBeDefined();
      const api = new ApiClient(first.url, key ?? '');
      const cap = await api.post('/capabilities', { name: 'persist', type: 'server_function_call', parameters: [{ name: 'a', type: 'number' }], webhookUrl: 'https://game.example/hook' }).expect(201);
      const ch = await api.post('/characters', { name: 'Durable', description: 'survives restarts', capabilityGroupIds: [cap.id] }).expect(201);
      const admin = new ApiClient(first.url, ADMIN_TOKEN);
      const project = await admin.post('/admin/projects', { name: 'second' }).expect(201);
      const revoked = await admin.post(`/admin/projects/${project.id}/keys`, {}).expect(201);
      await admin.delete(`/admin/keys/${revoked.id}`).expect(200);
      // The key went to stdout only, never into a JSON log line.
      for (const line of first.stdout().split('\n').filter((l) => l.startsWith('{'))) expect(line).not.toContain(key);
      expect(await first.stop('SIGTERM')).toBe(0);

      const second = await spawnTroupe(env);
      try {
        expect(second.stdout()).not.toMatch(/sk-troupe-/);
        const again = new ApiClient(second.url, key ?? '');
        expect(await again.get(`/characters/${ch.id}`).expect(200)).toEqual(ch);
        expect(await again.get(`/capabilities/${cap.id}`).expect(200)).toEqual(cap);
        await new ApiClient(second.url, revoked.key).get('/characters').expect(401);
        const projects = await new ApiClient(second.url, ADMIN_TOKEN).get('/admin/projects').expect(200);
        expect(projects.map((p: { id: string }) => p.id)).toContain(project.id);
      } finally {
        expect(await second.stop('SIGINT')).toBe(0);
      }
    } finally {
      await storage.dispose();
    }
  });

  it('drains an in-flight request on shutdown, then refuses new connections', async () => {
    const t = await startTestServer(backend);
    const { key } = await t.newProject();
    const port = Number(new URL(t.url).port);
    const body = JSON.stringify({ name: 'Late arrival' });
    const socket = connect(port, '127.0.0.1');
    const reply = new Promise<string>((resolve) => {
      let data = '';
      socket.on('data', (chunk) => {
        data += chunk.toString();
        if (data.includes('\r\n\r\n') && data.includes('"Late arrival"')) resolve(data);
      });
    });
    await new Promise<void>((resolve) => socket.write(
      `POST /characters HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
      () => resolve(),
    ));
    // Shutdown starts only once the server counts the half-sent request as in flight.
    await untilInFlight(t.url, 2); // the half-sent request plus this /metrics request
    const stopped = t.close();
    socket.write(body.slice(5));
    expect(await reply).toMatch(/^HTTP\/1\.1 201/);
    await stopped;
    socket.destroy();
    await expect(fetch(`${t.url}/healthz`)).rejects.toThrow();
  });

  it('closes WebSockets with 1001 as soon as its actors are idle, while a slow request still drains', async () => {
    const t = await startTestServer(backend);
    const { key, client } = await t.newProject();
    const character = await client.post('/characters', { name: 'Doorwarden' }).expect(201);
    const conversation = await client.post('/conversations', { characterId: character.id }).expect(201);
    const socket = await openSocket(`${t.url.replace('http://', 'ws://')}/conversations/${conversation.id as string}/ws?token=${key}`);
    await socket.next('ready');
    const closedWith = new Promise<number>((resolve) => socket.ws.once('close', (code) => resolve(code)));
    // A request that stays in flight until this test finishes sending it.
    const body = JSON.stringify({ name: 'Slow sender' });
    const slow = connect(Number(new URL(t.url).port), '127.0.0.1');
    const reply = new Promise<string>((resolve) => {
      let data = '';
      slow.on('data', (chunk) => {
        data += chunk.toString();
        if (data.includes('"Slow sender"')) resolve(data);
      });
    });
    slow.write(`POST /characters HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
    await untilInFlight(t.url, 2);
    const stopped = t.close();
    // The socket goes while the request is still being drained (it has not been sent in full).
    expect(await closedWith).toBe(1001);
    slow.write(body.slice(5));
    expect(await reply).toMatch(/^HTTP\/1\.1 201/);
    await stopped;
    slow.destroy();
  });
});

describe('startup configuration', () => {
  it('fails fast with a message naming the bad variable', async () => {
    const bad = await runTroupeExpectingFailure({ PORT: 'eighty', LOG_LEVEL: 'loud', TROUPE_DATA_DIR: 'memory://' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('PORT');
    expect(bad.stderr).toContain('LOG_LEVEL');
  });
});

describe.each(BACKENDS.filter((b) => b.kind === 'postgres'))('two processes on one $kind database', (backend) => {
  it('invalidates cached characters and keys in the other process', async () => {
    const storage = await createStorage(backend);
    const a = await startTestServer(backend, { storage });
    const b = await startTestServer(backend, { storage });
    try {
      const { key, keyId, client: onA } = await a.newProject();
      const onB = b.client(key);
      const ch = await onA.post('/characters', { name: 'Before' }).expect(201);
      expect((await onB.get(`/characters/${ch.id}`).expect(200)).name).toBe('Before'); // cached on B now

      const characterSeen = nextInvalidation(b, 'character', ch.id);
      await onA.patch(`/characters/${ch.id}`, { name: 'After' }).expect(200);
      await characterSeen;
      expect((await onB.get(`/characters/${ch.id}`).expect(200)).name).toBe('After');

      const deletedSeen = nextInvalidation(b, 'character', ch.id);
      await onA.delete(`/characters/${ch.id}`).expect(200);
      await deletedSeen;
      await onB.get(`/characters/${ch.id}`).expect(404);

      const keySeen = nextInvalidation(b, 'apiKey');
      await a.admin.delete(`/admin/keys/${keyId}`).expect(200);
      await keySeen;
      await onB.get('/characters').expect(401);
    } finally {
      await a.close();
      await b.close();
      await storage.dispose();
    }
  });
});

type Started = Awaited<ReturnType<typeof startTestServer>>;

function nextInvalidation(t: Started, topic: 'character' | 'apiKey', id?: string): Promise<void> {
  return new Promise((resolve) => {
    t.server.resources.invalidations.subscribe(topic, {
      onInvalidate: (seen) => {
        if (id === undefined || seen === id) resolve();
      },
      onReset: () => resolve(),
    });
  });
}

/** Asks /metrics until the in-flight gauge reaches `count`; each round waits for a reply. */
async function untilInFlight(url: string, count: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const value = Number(/^troupe_http_requests_in_flight (\d+)/m.exec(text)?.[1] ?? 0);
    if (value >= count) return;
  }
  throw new Error('the request never showed up as in flight');
}
