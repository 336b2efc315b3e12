import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ApiClient } from '../support/client.ts';
import { createTempDatabase } from '../support/databases.ts';
import { HTTP_ENGINE, POSTGRES_URL, REDIS_URL } from '../support/env.ts';
import { startFaultProxy } from '../support/fault-proxy.ts';
import { trackChild } from '../support/leftovers.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/openai/fake-upstream.ts';
import { spawnTroupe, type TroupeProcess } from '../support/process.ts';
import { openSocket } from '../support/ws-client.ts';

const KEY = 'sk-troupe-failover_test_key_000001';
const FAILOVER_MS = 3_000;

/** Two Troupe processes on one PostgreSQL database and the given Redis. */
async function twoProcesses(redisUrl: string, extraEnv: Record<string, string> = {}, redisUrlOfA = redisUrl): Promise<{ a: TroupeProcess; b: TroupeProcess; characterId: string; upstream: FakeUpstream }> {
  const upstream = await startFakeUpstream({ defaultReply: () => ({ text: ['One, ', 'two, ', 'three.'].join(''), chunkDelayMs: 30 }) });
  onTestFinished(() => upstream.close());
  const db = await createTempDatabase(POSTGRES_URL as string);
  onTestFinished(() => db.drop());
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL: redisUrl,
    HTTP_ENGINE,
    LOG_LEVEL: 'info',
    TROUPE_BOOTSTRAP_KEY: KEY,
    INFERENCE_BASE_URL: upstream.url,
    INFERENCE_MODEL: 'fake-chat-1',
    ACTOR_FAILOVER_MS: String(FAILOVER_MS),
    ...extraEnv,
  };
  const [a, b] = await Promise.all([spawnTroupe({ ...env, REDIS_URL: redisUrlOfA }), spawnTroupe(env)]);
  onTestFinished(async () => void (await Promise.all([a.stop('SIGKILL'), b.stop('SIGKILL')])));
  const characterId = (await new ApiClient(a.url, KEY).post('/characters', { name: 'Tollkeeper' }).expect(201)).id as string;
  return { a, b, characterId, upstream };
}

/** A private redis-server on a free port, which the test can restart empty. */
async function privateRedis(): Promise<{ url: string; restart: () => Promise<void> }> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  let server: ChildProcess;
  const start = async () => {
    server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'ignore'] });
    trackChild(server);
    let out = '';
    await new Promise<void>((resolve, reject) => {
      server.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('Ready to accept connections')) resolve();
      });
      server.once('exit', () => reject(new Error(`redis-server exited:\n${out}`)));
    });
  };
  await start();
  onTestFinished(() => void server.kill('SIGKILL'));
  return {
    url: `redis://127.0.0.1:${port}`,
    async restart() {
      const exited = once(server, 'exit');
      server.kill('SIGKILL');
      await exited;
      await start();
    },
  };
}

const contents = async (api: ApiClient, id: string) =>
  ((await api.get(`/conversations/${id}`).expect(200)).messages as { role: string; content: string }[]).map((m) => `${m.role}:${m.content}`);

describe.skipIf(!POSTGRES_URL || !REDIS_URL)('actors that survive their process and Redis', () => {
  it('takes over the conversations of a process killed with SIGKILL within ACTOR_FAILOVER_MS', async () => {
    const { a, b, characterId } = await twoProcesses(REDIS_URL as string);
    const apiA = new ApiClient(a.url, KEY);
    const apiB = new ApiClient(b.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    await apiA.post(`/conversations/${id}/messages`, { content: 'on A' }).expect(200); // the actor runs on A
    expect(await a.stop('SIGKILL')).toBeNull();
    const started = performance.now();
    await apiB.post(`/conversations/${id}/messages`, { content: 'on B' }).expect(200);
    // Noticed by health check, then rebuilt from PostgreSQL: a bound on not hanging, with slack.
    expect(performance.now() - started).toBeLessThan(FAILOVER_MS + 5_000);
    expect(await contents(apiB, id)).toEqual(['player:on A', 'character:One, two, three.', 'player:on B', 'character:One, two, three.']);
  });

  it("stores a message exactly once when its actor's process dies while answering it", async () => {
    const { a, b, characterId, upstream } = await twoProcesses(REDIS_URL as string);
    const apiA = new ApiClient(a.url, KEY);
    const apiB = new ApiClient(b.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    await apiA.post(`/conversations/${id}/messages`, { content: 'on A' }).expect(200); // the actor runs on A
    upstream.script({ text: 'Cut short', stallAfterChunks: 1 });
    const retried = apiB.post(`/conversations/${id}/messages`, { content: 'via B' }).expect(200);
    await upstream.nextRequest(); // the request for 'on A', answered already
    await upstream.nextRequest(); // A stored 'via B' and is answering it
    expect(await a.stop('SIGKILL')).toBeNull();
    const reply = await retried;
    expect(reply.playerMessage.content).toBe('via B');
    expect(await contents(apiB, id)).toEqual(['player:on A', 'character:One, two, three.', 'player:via B', 'character:One, two, three.']);
  });

  it("ends a reply on other processes' sockets with an error naming it when its process dies mid-stream", async () => {
    const { a, b, characterId, upstream } = await twoProcesses(REDIS_URL as string);
    const apiA = new ApiClient(a.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    await apiA.post(`/conversations/${id}/messages`, { content: 'on A' }).expect(200); // the actor runs on A
    const socket = await openSocket(`${b.url.replace('http://', 'ws://')}/conversations/${id}/ws?token=${KEY}`);
    await socket.next('ready');
    upstream.script({ text: 'Half a sentence and then', stallAfterChunks: 2 });
    void Promise.resolve(apiA.post(`/conversations/${id}/messages`, { content: 'go on' })).catch(() => {});
    const first = await socket.next('chunk');
    expect(first.done).toBe(false);
    expect(await a.stop('SIGKILL')).toBeNull();
    expect(await socket.next('error')).toMatchObject({ code: 'actor_lost', replyId: first.replyId });
    await socket.close();
  });

  it('finishes a reply under way on a draining process before another takes the conversation over', async () => {
    const { a, b, characterId, upstream } = await twoProcesses(REDIS_URL as string);
    const apiA = new ApiClient(a.url, KEY);
    const apiB = new ApiClient(b.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    upstream.script({ text: 'A long, slow answer that takes its time.', chunkDelayMs: 150 });
    const slow = apiA.post(`/conversations/${id}/messages`, { content: 'tell me slowly' }).expect(200);
    await upstream.nextRequest(); // the reply is streaming on A
    const exited = a.stop('SIGTERM');
    await a.waitForOutput(/"msg":"shutting down"/);
    await apiB.post(`/conversations/${id}/messages`, { content: 'and then?' }).expect(200);
    await slow;
    expect(await exited).toBe(0);
    expect(await contents(apiB, id)).toEqual([
      'player:tell me slowly',
      'character:A long, slow answer that takes its time.',
      'player:and then?',
      'character:One, two, three.',
    ]);
  });

  it('exits on SIGTERM within the grace period even with a call to another process pending', async () => {
    const { a, b, characterId, upstream } = await twoProcesses(REDIS_URL as string, { SHUTDOWN_GRACE_MS: '1000' });
    const apiA = new ApiClient(a.url, KEY);
    const apiB = new ApiClient(b.url, KEY);
    const id = (await apiB.post('/conversations', { characterId }).expect(201)).id as string;
    await apiB.post(`/conversations/${id}/messages`, { content: 'the actor lives on B' }).expect(200);
    upstream.script({ text: 'This reply never ends', stallAfterChunks: 1 });
    // Its caller gets an error status or a closed connection, whichever the stop gives.
    const pending = Promise.resolve(apiA.post(`/conversations/${id}/messages`, { content: 'through A' })).then(
      (res) => res.status,
      () => 'closed',
    );
    await upstream.nextRequest(); // A waits on B's actor, which waits on the upstream
    const started = performance.now();
    const code = await a.stop('SIGTERM');
    expect(code === 0 || code === 1).toBe(true);
    // Grace (1 s) plus the 3 s after which a stopping process exits regardless, plus slack.
    expect(performance.now() - started).toBeLessThan(1_000 + 3_000 + 4_000);
    expect([500, 502, 503, 'closed']).toContain(await pending);
  });

  it('refuses every write of an actor whose process was cut off from Redis and superseded', async () => {
    const u = new URL(REDIS_URL as string);
    const proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port || 6379) });
    onTestFinished(() => proxy.close());
    const { a, b, characterId } = await twoProcesses(REDIS_URL as string, {}, proxy.via(REDIS_URL as string));
    const apiA = new ApiClient(a.url, KEY);
    const apiB = new ApiClient(b.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    await apiA.post(`/conversations/${id}/messages`, { content: 'on A' }).expect(200); // the actor runs on A
    await proxy.cut('reset'); // A is alive but cut off: B cannot reach it and takes over
    await apiB.post(`/conversations/${id}/messages`, { content: 'via B' }).expect(200);
    // A's actor is still there and A's own callers still reach it; its write is fenced off.
    const fenced = await apiA.post(`/conversations/${id}/messages`, { content: 'via A' });
    expect(fenced.status, fenced.text).toBe(503);
    await proxy.restore();
    expect(await contents(apiB, id)).toEqual(['player:on A', 'character:One, two, three.', 'player:via B', 'character:One, two, three.']);
  });

  it('answers 503 at once when the listed owner lives but does not answer for the actor', async () => {
    const { a, b, characterId } = await twoProcesses(REDIS_URL as string);
    const apiA = new ApiClient(a.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    // A listing that names B, which runs no such actor (as a listing left behind when Redis
    // failed as B unlisted it would): B's heartbeat is fine, but nobody answers for the actor.
    const processIdOfB = /"processId":"([^"]+)"[^\n]*"msg":"actor system ready"/.exec(b.stdout())?.[1];
    expect(processIdOfB).toBeDefined();
    const redis = new Redis(REDIS_URL as string);
    onTestFinished(() => void redis.quit());
    const listing = { name: 'conversation', roomId: id, processId: processIdOfB, clients: 0, locked: false, private: false, unlisted: false, createdAt: new Date().toISOString() };
    await redis.hset('roomcaches', id, JSON.stringify(listing));
    onTestFinished(async () => void (await redis.hdel('roomcaches', id)));
    const started = performance.now();
    const answer = await apiA.post(`/conversations/${id}/messages`, { content: 'anyone home?' });
    expect(answer.status).toBe(503);
    expect(answer.body.error.code).toBe('actor_unresponsive');
    // The acknowledgement timeout (2 s) plus slack, not the reply timeout (minutes).
    expect(performance.now() - started).toBeLessThan(8_000);
    // The message was not stored: the caller may send it again.
    expect(await contents(apiA, id)).toEqual([]);
  });

  it('keeps one actor per conversation through a Redis restart that loses every listing', async () => {
    const redis = await privateRedis();
    const { a, b, characterId } = await twoProcesses(redis.url);
    const apiA = new ApiClient(a.url, KEY);
    const apiB = new ApiClient(b.url, KEY);
    const id = (await apiA.post('/conversations', { characterId }).expect(201)).id as string;
    await apiA.post(`/conversations/${id}/messages`, { content: 'first' }).expect(200);
    await redis.restart();
    // Both messages at once, one through each process: one actor takes them one at a time.
    await Promise.all([
      apiA.post(`/conversations/${id}/messages`, { content: 'via A' }).expect(200),
      apiB.post(`/conversations/${id}/messages`, { content: 'via B' }).expect(200),
    ]);
    const history = await contents(apiA, id);
    expect(history).toHaveLength(6);
    expect(history.map((line) => line.split(':')[0])).toEqual(['player', 'character', 'player', 'character', 'player', 'character']);
    await a.waitForOutput(/"msg":"actors listed again after the Redis connection came back"/);
  });
});
