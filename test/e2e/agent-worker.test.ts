// `npm run agent` and `npm start`'s agent worker, as users run them, against a stand-in for
// LiveKit's agent endpoint (no LiveKit server can run here): the worker must register over the
// real protocol (a signed agent token, a protobuf `register` message) under LIVEKIT_AGENT_NAME.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WorkerMessage } from '@livekit/protocol';
import { TokenVerifier } from 'livekit-server-sdk';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { JobRequest } from '@livekit/agents';
import { acceptJob } from '../../src/voice/worker.ts';
import { BACKENDS } from '../support/env.ts';
import { trackChild } from '../support/leftovers.ts';
import { createStorage } from '../support/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const KEYS = { LIVEKIT_API_KEY: 'APIworkertest', LIVEKIT_API_SECRET: 'worker-test-secret-0123456789abcdefghijklmn' };
const SPEECH = { STT_BASE_URL: 'http://127.0.0.1:9/v1', STT_MODEL: 'whisper-1', TTS_BASE_URL: 'http://127.0.0.1:9/v1', TTS_MODEL: 'tts-1' };
const backend = BACKENDS.at(-1) ?? BACKENDS[0]!;

interface Registration {
  agentName: string;
  agentGrant: boolean | undefined;
}

/** LiveKit's `/agent` WebSocket, as far as a worker's registration goes. */
async function fakeAgentEndpoint() {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', path: '/agent' });
  await once(wss, 'listening');
  const registrations: Registration[] = [];
  let notify: (() => void) | null = null;
  wss.on('connection', (ws, req) => {
    const jwt = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    ws.once('message', (data: Buffer) => {
      void new TokenVerifier(KEYS.LIVEKIT_API_KEY, KEYS.LIVEKIT_API_SECRET).verify(jwt).then(
        (claims) => {
          const message = WorkerMessage.fromBinary(new Uint8Array(data));
          if (message.message.case === 'register') registrations.push({ agentName: message.message.value.agentName, agentGrant: claims.video?.agent });
          notify?.();
        },
        () => ws.close(1008, 'bad token'),
      );
    });
  });
  return {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    registrations,
    registered: () => (registrations.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => (notify = resolve))),
    close: () => new Promise<void>((resolve) => wss.close(() => resolve())),
  };
}

function npm(args: string[], env: Record<string, string>): { proc: ChildProcess; output: () => string; exited: Promise<[number | null, string | null]> } {
  const proc = spawn('npm', args, { cwd: ROOT, env: { ...process.env, ...env, HTTP_ENGINE: 'auto', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(proc);
  let out = '';
  proc.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  proc.stderr?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return { proc, output: () => out, exited: once(proc, 'exit') as Promise<[number | null, string | null]> };
}

describe('the voice agent worker', () => {
  let endpoint: Awaited<ReturnType<typeof fakeAgentEndpoint>>;
  const procs: ChildProcess[] = [];
  beforeEach(async () => {
    endpoint = await fakeAgentEndpoint();
  });
  afterEach(async () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await endpoint.close();
  });

  it('npm run agent registers with LiveKit for explicit dispatch under LIVEKIT_AGENT_NAME, and stops on SIGTERM', async () => {
    const run = npm(['run', 'agent'], { ...KEYS, ...SPEECH, LIVEKIT_URL: endpoint.url, LIVEKIT_AGENT_NAME: 'troupe-test-voices' });
    procs.push(run.proc);
    await Promise.race([endpoint.registered(), run.exited.then(() => Promise.reject(new Error(`npm run agent exited:\n${run.output()}`)))]);
    expect(endpoint.registrations[0]).toEqual({ agentName: 'troupe-test-voices', agentGrant: true });
    run.proc.kill('SIGTERM');
    expect((await run.exited)[0]).toBe(0);
  });

  it('says what is missing at start, naming the variables, and exits 1', async () => {
    const run = npm(['run', 'agent'], {});
    procs.push(run.proc);
    expect((await run.exited)[0]).toBe(1);
    expect(run.output()).toContain('voice rooms need LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET');
    expect(run.output()).toContain('STT_MODEL is not set');
    // Half a LiveKit configuration is a configuration error, named as such.
    const half = npm(['run', 'agent'], { LIVEKIT_URL: endpoint.url });
    procs.push(half.proc);
    expect((await half.exited)[0]).toBe(1);
    expect(half.output()).toContain('missing: LIVEKIT_API_KEY, LIVEKIT_API_SECRET');
    expect(endpoint.registrations).toEqual([]);
  });

  it('npm start runs it beside the server when LiveKit is configured (ROOM_AGENTS=auto), and stops it too', async () => {
    const storage = await createStorage(backend);
    try {
      const run = npm(['start'], { ...storage.env, ...KEYS, ...SPEECH, LIVEKIT_URL: endpoint.url });
      procs.push(run.proc);
      await Promise.race([endpoint.registered(), run.exited.then(() => Promise.reject(new Error(`npm start exited:\n${run.output()}`)))]);
      expect(endpoint.registrations[0]?.agentName).toBe('troupe-character');
      expect(run.output()).toContain('"msg":"voice agent worker started"');
      run.proc.kill('SIGTERM');
      expect((await run.exited)[0]).toBe(0);
      expect(run.output()).toContain('"msg":"troupe stopped"');
    } finally {
      await storage.dispose();
    }
  });

  it('accepts a job as its character (identity agent-<characterId>, the character name) and rejects a job that is not Troupe\'s', async () => {
    const calls: unknown[][] = [];
    const request = (metadata: string) =>
      ({ job: { metadata }, accept: async (...args: unknown[]) => void calls.push(['accept', ...args]), reject: async () => void calls.push(['reject']) }) as unknown as JobRequest;
    await acceptJob(request(JSON.stringify({ projectId: 'proj_1', roomId: 'room_1', characterId: 'character_1', characterName: 'Mira Vance' })));
    await acceptJob(request(JSON.stringify({ projectId: 'proj_1', roomId: 'room_1', characterId: 'character_2' })));
    await acceptJob(request('not json'));
    expect(calls).toEqual([['accept', 'Mira Vance', 'agent-character_1'], ['accept', 'character_2', 'agent-character_2'], ['reject']]);
  });
});
