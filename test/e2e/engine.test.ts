import { once } from 'node:events';
import { connect } from 'node:net';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBody } from '../../src/http/body.ts';
import { startHttpServer } from '../../src/http/engine.ts';
import type { HttpHandler, HttpReply, HttpServer, ReplySink } from '../../src/http/types.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { HTTP_ENGINE } from '../support/env.ts';

/** The adapter contract, checked on the engine under test with handlers written here. */
describe(`engine adapter contract (${HTTP_ENGINE})`, () => {
  let server: HttpServer;
  let url: string;
  const routes = new Map<string, HttpHandler>();

  beforeAll(async () => {
    server = await startHttpServer(
      HTTP_ENGINE,
      {
        host: '127.0.0.1',
        port: 0,
        handler: async (req) => (routes.get(req.path) ?? (async () => ({ status: 404, headers: {}, body: '' })))(req),
        onAdapterError: (err) => {
          throw err;
        },
      },
      createLogger('silent'),
    );
    url = `http://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.close(1000));

  it('streams chunks as they are written, not at the end', async () => {
    let clientGotFirst!: () => void;
    const firstSeen = new Promise<void>((resolve) => (clientGotFirst = resolve));
    routes.set('/stream', async () => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      stream: async (sink) => {
        await sink.write('data: one\n\n');
        await firstSeen; // the second chunk waits until the client has the first
        await sink.write('data: two\n\n');
      },
    }));
    const res = await fetch(`${url}/stream`);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toBe('data: one\n\n');
    clientGotFirst();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toBe('data: two\n\n');
  });

  it('stops writing for a reader that does not read, and delivers everything once it does', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    const total = 64;
    let written = 0;
    let blockedAt = -1;
    let blocked!: () => void;
    const isBlocked = new Promise<void>((resolve) => (blocked = resolve));
    routes.set('/flood', async () => ({
      status: 200,
      headers: { 'content-type': 'application/octet-stream' },
      stream: async (sink: ReplySink) => {
        for (let i = 0; i < total; i++) {
          const pending = Promise.resolve(sink.write(chunk));
          // A write still pending after a full event-loop turn means the engine is holding us back.
          const state = await Promise.race([pending.then(() => 'done'), new Promise((r) => setImmediate(() => r('pending')))]);
          if (state === 'pending' && blockedAt < 0) {
            blockedAt = written;
            blocked();
          }
          if (!(await pending)) return;
          written += chunk.length;
        }
      },
    }));
    const res = await new Promise<IncomingMessage>((resolve) => httpRequest(`${url}/flood`, resolve).end());
    res.pause();
    await isBlocked;
    // Without backpressure all 64 MiB would be "written" into memory before the client read a byte.
    expect(blockedAt).toBeGreaterThanOrEqual(0);
    expect(blockedAt).toBeLessThan(32 * 1024 * 1024);
    let received = 0;
    res.on('data', (c: Buffer) => (received += c.length));
    res.resume();
    await once(res, 'end');
    expect(received).toBe(total * chunk.length);
  });

  it('aborts the request signal and fails writes when the client goes away mid-stream', async () => {
    let aborted!: () => void;
    const sawAbort = new Promise<void>((resolve) => (aborted = resolve));
    let lastWrite: boolean | null = null;
    routes.set('/abandon', async (req) => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      stream: async (sink) => {
        await sink.write('data: hello\n\n');
        req.signal.addEventListener('abort', () => aborted());
        if (!req.signal.aborted) await once(req.signal, 'abort');
        lastWrite = await sink.write('data: anyone?\n\n');
      },
    }));
    const controller = new AbortController();
    const res = await fetch(`${url}/abandon`, { signal: controller.signal });
    await res.body!.getReader().read();
    controller.abort();
    await sawAbort;
    await expect.poll(() => lastWrite, { interval: 5 }).toBe(false);
  });

  it('streams a large request body to the handler intact', async () => {
    routes.set('/echo-size', async (req) => {
      let size = 0;
      let sum = 0;
      for await (const part of req.body) {
        size += part.byteLength;
        for (const b of part) sum = (sum + b) % 65521;
      }
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ size, sum }) };
    });
    const payload = Buffer.alloc(5 * 1024 * 1024);
    for (let i = 0; i < payload.length; i++) payload[i] = i % 251;
    let expectedSum = 0;
    for (const b of payload) expectedSum = (expectedSum + b) % 65521;
    const res = await fetch(`${url}/echo-size`, { method: 'POST', body: payload });
    expect(await res.json()).toEqual({ size: payload.length, sum: expectedSum });
  });

  it('answers early when a handler stops reading, and closes that connection', async () => {
    routes.set('/capped', async (req): Promise<HttpReply> => {
      try {
        await readBody(req, 1000);
        return { status: 200, headers: {}, body: 'ok' };
      } catch {
        return { status: 413, headers: { 'content-type': 'text/plain' }, body: 'too large' };
      }
    });
    const res = await fetch(`${url}/capped`, { method: 'POST', body: Buffer.alloc(10 * 1024 * 1024) });
    expect(res.status).toBe(413);
    expect(await res.text()).toBe('too large');
    expect(res.headers.get('connection')).toBe('close');
  });
});

describe(`engine WebSocket contract (${HTTP_ENGINE})`, () => {
  let server: HttpServer;
  let wsUrl: string;
  const closes: { code: number; reason: string }[] = [];
  let closed: (() => void) | null = null;

  beforeAll(async () => {
    server = await startHttpServer(
      HTTP_ENGINE,
      {
        host: '127.0.0.1',
        port: 0,
        handler: async () => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'plain http still works' }),
        maxWebSocketMessageBytes: 64 * 1024,
        upgrade: async (req) => {
          if (req.query.get('token') !== 'good') {
            return { status: 401, headers: { 'content-type': 'application/json' }, body: '{"error":"no"}' };
          }
          return {
            onOpen: (session) => session.send(JSON.stringify({ type: 'ready', path: req.path })),
            onMessage: (session, bytes) => {
              const data = Buffer.from(bytes).toString('utf8');
              if (data === 'throw') throw new Error('handler bug');
              if (data === 'bye') session.close(4000, 'asked to leave');
              else session.send(`echo:${data}`);
            },
            onClose: (code, reason) => {
              closes.push({ code, reason });
              closed?.();
            },
          };
        },
        onAdapterError: () => {},
      },
      createLogger('silent'),
    );
    wsUrl = `ws://127.0.0.1:${server.port}`;
  });
  afterAll(() => server.close(1000));

  function open(path: string): Promise<{ ws: WebSocket; messages: string[]; next: () => Promise<string> }> {
    const ws = new WebSocket(`${wsUrl}${path}`);
    const messages: string[] = [];
    const waiters: ((m: string) => void)[] = [];
    ws.addEventListener('message', (e) => {
      const waiter = waiters.shift();
      if (waiter) waiter(String(e.data));
      else messages.push(String(e.data));
    });
    const next = () => (messages.length > 0 ? Promise.resolve(messages.shift() as string) : new Promise<string>((r) => waiters.push(r)));
    return new Promise((resolve, reject) => {
      ws.addEventListener('open', () => resolve({ ws, messages, next }));
      ws.addEventListener('error', () => reject(new Error('websocket refused')));
    });
  }

  it('accepts an upgrade the handler accepts and exchanges text frames', async () => {
    const { ws, next } = await open('/sockets/one?token=good');
    expect(JSON.parse(await next())).toEqual({ type: 'ready', path: '/sockets/one' });
    ws.send('hello');
    expect(await next()).toBe('echo:hello');
    // A handler that throws is contained: the socket keeps working.
    ws.send('throw');
    ws.send('still here');
    expect(await next()).toBe('echo:still here');
    const gone = new Promise<void>((r) => (closed = r));
    ws.send('bye');
    const event = await new Promise<{ code: number }>((r) => ws.addEventListener('close', (e) => r(e)));
    expect(event.code).toBe(4000);
    await gone;
    expect(closes.at(-1)?.code).toBe(4000);
    expect(await (await fetch(`http://127.0.0.1:${server.port}/anything`)).text()).toBe('plain http still works');
  });

  it('refuses an upgrade with the reply the handler chose, before any socket exists', async () => {
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(server.port, '127.0.0.1', () => {
        socket.write('GET /sockets/one?token=bad HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
      });
      let data = '';
      socket.on('data', (c) => (data += c.toString()));
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 401/);
    expect(raw).toContain('{"error":"no"}');
  });

  it('closes a socket that sends a message over the size limit', async () => {
    const { ws, next } = await open('/sockets/big?token=good');
    await next();
    ws.send('x'.repeat(100 * 1024));
    const event = await new Promise<{ code: number }>((r) => ws.addEventListener('close', (e) => r(e)));
    expect([1006, 1009]).toContain(event.code);
  });
});
