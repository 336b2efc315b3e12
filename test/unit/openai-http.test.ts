import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenAiHttp, UpstreamConnectionError, UpstreamStatusError } from '../../src/inference/openai-http.ts';
import { sseJson, UpstreamStreamError } from '../../src/inference/sse-reader.ts';

/** A real HTTP server whose reply each test writes by hand, byte range by byte range. */
let server: Server;
let base: string;
let respond: (res: ServerResponse, body: string) => void = () => {};
const sockets = new Set<unknown>();

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (part: Buffer) => (body += part.toString()));
    req.on('end', () => respond(res, body));
  });
  server.on('connection', (socket) => sockets.add(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
});

const client = (maxRetries = 0) => new OpenAiHttp({ baseUrl: base, apiKey: 'k', connectTimeoutMs: 2_000, maxRetries });
const streamOf = (...pieces: string[]) => {
  respond = (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const piece of pieces) res.write(piece);
    res.end();
  };
};
const collect = async (http: OpenAiHttp) => {
  const out: unknown[] = [];
  for await (const event of sseJson(await http.post('chat/completions', { model: 'm' }, new AbortController().signal))) out.push(event);
  return out;
};

describe('the inference HTTP client and its SSE reader', () => {
  it('reads events split anywhere, with CRLF, comments and multi-line data, and stops at [DONE]', async () => {
    streamOf(': keep-alive\r\n\r\ndata: {"a"', ':1}\r\n\r\ndata: {"b":\ndata: 2}\n\n', 'event: message\ndata: {"c":3}\n\ndata: [DONE]\n\ndata: {"ignored":true}\n\n');
    expect(await collect(client())).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
  });

  it('keeps the connection for the next call after [DONE]', async () => {
    const http = client();
    streamOf('data: {"n":1}\n\ndata: [DONE]\n\n');
    await collect(http);
    const before = sockets.size;
    await collect(http);
    expect(sockets.size).toBe(before);
  });

  it('throws the error an upstream streams, and a payload that is not JSON', async () => {
    streamOf('data: {"n":1}\n\nevent: error\ndata: {"error":{"message":"overloaded"}}\n\n');
    await expect(collect(client())).rejects.toThrow(new UpstreamStreamError('overloaded'));
    streamOf('data: {"n":1}\n\ndata: not json\n\n');
    await expect(collect(client())).rejects.toBeInstanceOf(UpstreamStreamError);
  });

  it('counts a last event without its blank line, and fails a stream cut off mid-way', async () => {
    streamOf('data: {"n":1}\n\ndata: {"n":2}');
    expect(await collect(client())).toEqual([{ n: 1 }, { n: 2 }]);
    respond = (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\n', () => res.destroy());
    };
    await expect(collect(client())).rejects.toBeInstanceOf(Error);
  });

  it('pumps each arrival with one flush, pausing the response while a flush waits, and settles at [DONE]', async () => {
    const opened = Promise.withResolvers<ServerResponse>();
    respond = (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"n":1}\n\ndata: {"n":2}\n\n');
      opened.resolve(res);
    };
    const response = await client().post('chat/completions', { model: 'm' }, new AbortController().signal);
    const upstream = await opened.promise;
    const delivered: unknown[] = [];
    const batches: unknown[][] = [];
    const held = Promise.withResolvers<boolean>();
    const firstFlush = Promise.withResolvers<void>();
    let pending: unknown[] = [];
    const done = sseJson(response).pump(
      (payload) => (delivered.push(payload), pending.push(payload)),
      () => {
        if (pending.length === 0) return true;
        batches.push(pending);
        pending = [];
        if (batches.length > 1) return true;
        firstFlush.resolve();
        return held.promise;
      },
    );
    await firstFlush.promise;
    // The client's socket is full: nothing more is read until it drains.
    expect(response.isPaused()).toBe(true);
    upstream.write('data: {"n":3}\n\n');
    held.resolve(true);
    upstream.end('data: [DONE]\n\n');
    expect(await done).toBe(true);
    expect(response.isPaused()).toBe(false);
    expect(batches[0]).toEqual([{ n: 1 }, { n: 2 }]);
    expect(delivered).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('stops pumping once a flush says the client left, and rejects with a failure after flushing what came first', async () => {
    streamOf('data: {"n":1}\n\n', 'data: {"n":2}\n\n');
    const left = sseJson(await client().post('chat/completions', { model: 'm' }, new AbortController().signal));
    expect(await left.pump(() => {}, () => false)).toBe(false);
    streamOf('data: {"n":1}\n\nevent: error\ndata: {"error":{"message":"overloaded"}}\n\n');
    const delivered: unknown[] = [];
    let flushes = 0;
    const failing = sseJson(await client().post('chat/completions', { model: 'm' }, new AbortController().signal));
    await expect(failing.pump((payload) => delivered.push(payload), () => (flushes++, true))).rejects.toThrow(new UpstreamStreamError('overloaded'));
    expect(delivered).toEqual([{ n: 1 }]);
    expect(flushes).toBeGreaterThan(0);
  });

  it('reports a status error with the body message, retrying only what may succeed', async () => {
    let calls = 0;
    respond = (res) => {
      calls++;
      res.writeHead(calls === 1 ? 503 : 400, { 'content-type': 'application/json', 'retry-after-ms': '10' });
      res.end(JSON.stringify({ error: { message: calls === 1 ? 'busy' : 'too long' } }));
    };
    const err = await client(2).post('chat/completions', {}, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamStatusError);
    expect(err).toMatchObject({ status: 400, message: 'too long' });
    expect(calls).toBe(2);
  });

  it('fails a refused connection as a connection error', async () => {
    const closed = new OpenAiHttp({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: undefined, connectTimeoutMs: 2_000, maxRetries: 0 });
    await expect(closed.post('chat/completions', {}, new AbortController().signal)).rejects.toBeInstanceOf(UpstreamConnectionError);
  });
});
