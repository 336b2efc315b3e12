import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../support/client.ts';
import { BACKENDS, HTTP_ENGINE } from '../support/env.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.each(BACKENDS)(`HTTP layer (engine ${HTTP_ENGINE}) on $kind`, (backend) => {
  let t: TestServer;
  let api: ApiClient;
  let key: string;

  beforeAll(async () => {
    t = await startTestServer(backend, {
      env: { CORS_ORIGINS: 'https://game.example, https://console.example', MAX_JSON_BODY_BYTES: '4096' },
    });
    ({ client: api, key } = await t.newProject());
  });
  afterAll(() => t.close());

  it('runs on the engine the test run asked for', () => {
    if (HTTP_ENGINE !== 'auto') expect(t.server.engine).toBe(HTTP_ENGINE);
  });

  it('serves /healthz and /readyz without credentials', async () => {
    expect(await t.client(null).get('/healthz').expect(200)).toEqual({ status: 'ok' });
    expect(await t.client(null).get('/readyz').expect(200)).toEqual({ status: 'ready', database: backend.kind, redis: false });
  });

  it('puts x-request-id on every response, keeping a sane incoming one', async () => {
    const responses = await Promise.all([
      api.get('/characters'),
      api.get('/nope'),
      t.client(null).get('/characters'),
      api.post('/characters', {}),
      api.request('PUT', '/characters'),
    ]);
    for (const res of responses) expect(res.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
    const ids = new Set(responses.map((r) => r.headers.get('x-request-id')));
    expect(ids.size).toBe(responses.length);
    expect((await api.get('/characters', { 'x-request-id': 'trace-abc.123' })).headers.get('x-request-id')).toBe('trace-abc.123');
    expect((await api.get('/characters', { 'x-request-id': 'bad id with spaces' })).headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('answers unknown paths with a JSON 404 and wrong methods with a JSON 405 and Allow', async () => {
    const missing = await api.get('/does/not/exist');
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ type: 'invalid_request_error', code: 'route_not_found', param: null });
    const wrong = await api.request('PUT', '/characters');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, POST');
    expect(wrong.body.error.code).toBe('method_not_allowed');
    expect((await api.request('POST', '/characters/character_x')).headers.get('allow')).toBe('DELETE, GET, PATCH');
  });

  it('treats a trailing slash like none and HEAD like GET without a body', async () => {
    await api.get('/characters/').expect(200);
    const head = await api.request('HEAD', '/healthz');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it('caps JSON bodies: 413 with an error body and nothing created', async () => {
    const before = (await api.get('/characters?limit=1000').expect(200)).length;
    const big = await api.post('/characters', { name: 'Big', description: 'x'.repeat(5000) });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatchObject({ type: 'invalid_request_error', code: 'payload_too_large' });
    expect((await api.get('/characters?limit=1000').expect(200)).length).toBe(before);
  });

  it('stops reading a chunked body as soon as it crosses the cap', async () => {
    const { port } = new URL(t.url);
    const socket = connect(Number(port), '127.0.0.1');
    const reply = new Promise<string>((resolve, reject) => {
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });
    socket.write(
      `POST /characters HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    // Send 8 KiB (twice the cap) and never finish the body: the server must answer anyway.
    const chunk = 'x'.repeat(1024);
    for (let i = 0; i < 8; i++) socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const text = await reply;
    expect(text).toMatch(/^HTTP\/1\.1 413/);
    expect(text).toContain('payload_too_large');
  });

  it('sends CORS headers to allowed origins and answers preflight', async () => {
    const allowed = await api.get('/characters', { origin: 'https://game.example' });
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://game.example');
    expect(allowed.headers.get('access-control-expose-headers')).toContain('x-request-id');
    const denied = await api.get('/characters', { origin: 'https://evil.example' });
    expect(denied.headers.get('access-control-allow-origin')).toBeNull();

    const preflight = await t.client(null).request('OPTIONS', '/characters/character_x', undefined, {
      origin: 'https://console.example',
      'access-control-request-method': 'PATCH',
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://console.example');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('DELETE, GET, PATCH, OPTIONS');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('authorization');
  });

  it('exposes Prometheus metrics with request counts and latency histograms by route', async () => {
    await api.get('/characters').expect(200);
    const res = await t.client(null).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.text).toMatch(/troupe_http_requests_total\{method="GET",route="\/characters",status="200"\} \d+/);
    expect(res.text).toContain('troupe_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/characters",status="200"}');
    expect(res.text).toContain('troupe_process_cpu_seconds_total');
    expect(res.text).not.toContain('route="/does/not/exist"');
  });

  it('logs one JSON line per request with id, method, path, status and duration, never a key', async () => {
    const res = await api.get('/characters', { 'x-request-id': 'log-check-1' });
    const line = t.logs.find((l) => l.requestId === 'log-check-1');
    expect(line).toMatchObject({ msg: 'request', method: 'GET', path: '/characters', route: '/characters', status: res.status });
    expect(typeof line?.durationMs).toBe('number');
    expect(t.rawLogs.join('\n')).not.toContain(key);
    expect(t.rawLogs.join('\n')).not.toContain('test-admin-token');
  });

  it('describes every route in /openapi.json (OpenAPI 3.1)', async () => {
    const doc = await t.client(null).get('/openapi.json').expect(200);
    expect(doc.openapi).toBe('3.1.0');
    const routes = listRoutes(doc);
    const expected = [
      'get /healthz', 'get /readyz', 'get /metrics', 'get /openapi.json',
      'post /characters', 'get /characters', 'get /characters/{characterId}', 'patch /characters/{characterId}',
      'delete /characters/{characterId}', 'post /characters/{characterId}/capabilities',
      'delete /characters/{characterId}/capabilities/{capabilityId}',
      'post /capabilities', 'get /capabilities', 'get /capabilities/{capabilityId}', 'patch /capabilities/{capabilityId}',
      'delete /capabilities/{capabilityId}',
      'post /admin/projects', 'get /admin/projects', 'post /admin/projects/{projectId}/keys',
      'get /admin/projects/{projectId}/keys', 'delete /admin/keys/{keyId}',
      'get /v1/models', 'get /v1/models/{model}', 'post /v1/chat/completions',
      'post /v1/responses', 'get /v1/responses/{responseId}', 'delete /v1/responses/{responseId}',
      'get /admin/projects/{projectId}', 'post /conversations', 'get /conversations/{conversationId}',
      'post /conversations/{conversationId}/messages', 'get /conversations/{conversationId}/ws', 'post /perform',
      'post /matchmake/{method}/{roomId}',
      'post /characters/{characterId}/documents', 'get /characters/{characterId}/documents',
      'get /characters/{characterId}/documents/{documentId}', 'delete /characters/{characterId}/documents/{documentId}',
      'post /characters/{characterId}/documents/{documentId}/reprocess',
      'post /v1/rooms', 'get /v1/rooms', 'get /v1/rooms/{roomId}', 'post /v1/rooms/{roomId}/participants',
      'delete /v1/rooms/{roomId}/participants/{characterId}', 'get /v1/rooms/{roomId}/transcript', 'post /v1/rooms/{roomId}/end',
      'get /v1/rooms/{roomId}/token', 'post /v1/rooms/{roomId}/start', 'post /v1/livekit/webhook',
      'post /v1/rooms/{roomId}/messages', 'get /v1/rooms/{roomId}/ws',
    ];
    expect(routes.sort()).toEqual(expected.sort());
    const create = doc.paths['/characters'].post;
    expect(create.requestBody.content['application/json'].schema.required).toEqual(['name']);
    expect(create.responses['201'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Character' });
    expect(doc.components.schemas.Character.properties.capabilityGroupIds.type).toBe('array');
    expect(doc.components.schemas.Capability.properties.type.enum).toContain('server_function_call');
    expect(create.security).toEqual([{ apiKey: [] }]);
    expect(doc.paths['/characters/{characterId}'].get.parameters[0]).toMatchObject({ name: 'characterId', in: 'path', required: true });
    const upload = doc.paths['/characters/{characterId}/documents'].post;
    expect(upload.requestBody.content['multipart/form-data'].schema.required).toEqual(['file']);
    expect(Object.keys(upload.responses)).toEqual(expect.arrayContaining(['202', '413', '415']));
  });
});

function listRoutes(doc: { paths: Record<string, Record<string, unknown>> }): string[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method} ${path}`));
}
