import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../support/client.ts';
import { BACKENDS } from '../support/env.ts';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

describe.each(BACKENDS)('API keys, projects and isolation on $kind', (backend) => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer(backend);
  });
  afterAll(() => t.close());

  it('answers 401 with an error body for a missing, malformed, unknown or non-Bearer key', async () => {
    const cases: [ApiClient, Record<string, string>][] = [
      [t.client(null), {}],
      [t.client(null), { authorization: 'Basic dXNlcjpwYXNz' }],
      [t.client('not-a-key'), {}],
      [t.client('sk-troupe-thisKeyDoesNotExist1234567890'), {}],
    ];
    for (const [client, headers] of cases) {
      const res = await client.get('/characters', headers);
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: 'authentication_error', param: null });
      expect(res.body.error.code).toMatch(/^(missing|invalid)_api_key$/);
    }
  });

  it('creates keys of the form sk-troupe-<secret> and lists them without secrets', async () => {
    const project = await t.admin.post('/admin/projects', { name: 'Studio A' }).expect(201);
    expect(project).toEqual({ id: expect.stringMatching(/^proj_/), name: 'Studio A', createdAt: expect.any(String) });
    const key = await t.admin.post(`/admin/projects/${project.id}/keys`, { name: 'game server' }).expect(201);
    expect(key).toEqual({
      id: expect.stringMatching(/^key_/),
      key: expect.stringMatching(/^sk-troupe-[A-Za-z0-9_-]{40,}$/),
      projectId: project.id,
      name: 'game server',
      createdAt: expect.any(String),
    });
    const unnamed = await t.admin.post(`/admin/projects/${project.id}/keys`).expect(201);
    expect(unnamed.name).toBeNull();

    const listed = await t.admin.get(`/admin/projects/${project.id}/keys`);
    expect(listed.status).toBe(200);
    expect(listed.body.map((k: { id: string }) => k.id)).toEqual([key.id, unnamed.id]);
    expect(listed.text).not.toContain(key.key);
    expect(listed.text).not.toContain(unnamed.key);
    expect(listed.body[0]).toEqual({
      id: key.id,
      projectId: project.id,
      name: 'game server',
      prefix: key.key.slice(0, 14),
      createdAt: key.createdAt,
      revokedAt: null,
    });
    expect((await t.admin.get('/admin/projects').expect(200)).map((p: { id: string }) => p.id)).toContain(project.id);
  });

  it('stores only a hash of each key', async () => {
    const { key, keyId } = await t.newProject();
    const rows = await t.server.resources.database.db.query.apiKeys.findMany();
    const row = rows.find((r) => r.id === keyId);
    expect(row?.keyHash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(rows)).not.toContain(key);
  });

  it('revoking a key stops it at once, and leaves other keys working', async () => {
    const { projectId, keyId, client } = await t.newProject();
    const second = await t.admin.post(`/admin/projects/${projectId}/keys`, {}).expect(201);
    await client.get('/characters').expect(200); // warm the key cache
    const revoked = await t.admin.delete(`/admin/keys/${keyId}`).expect(200);
    expect(revoked).toMatchObject({ id: keyId, revokedAt: expect.any(String) });
    expect((await client.get('/characters').expect(401)).error.code).toBe('invalid_api_key');
    await t.client(second.key).get('/characters').expect(200);
    // Revoking again is harmless; unknown keys are 404.
    expect((await t.admin.delete(`/admin/keys/${keyId}`).expect(200)).revokedAt).toBe(revoked.revokedAt);
    expect((await t.admin.delete('/admin/keys/key_unknown').expect(404)).error.code).toBe('api_key_not_found');
  });

  it('guards the admin API with the admin token', async () => {
    for (const client of [t.client(null), t.client('wrong-token-wrong-token'), (await t.newProject()).client]) {
      const res = await client.post('/admin/projects', { name: 'x' });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_admin_token');
    }
    expect((await t.admin.post('/admin/projects/proj_missing/keys', {}).expect(404)).error.code).toBe('project_not_found');
    expect((await t.admin.get('/admin/projects/proj_missing/keys').expect(404)).error.code).toBe('project_not_found');
    expect((await t.admin.post('/admin/projects', {}).expect(400)).error.param).toBe('name');
    // The admin token is not an API key.
    expect((await t.client(ADMIN_TOKEN).get('/characters').expect(401)).error.code).toBe('invalid_api_key');
  });

  it("answers 404, never 403 and never data, for another project's resources", async () => {
    const owner = await t.newProject('owner');
    const other = await t.newProject('intruder');
    const cap = await owner.client.post('/capabilities', { name: 'secret_move', type: 'client_function_fire', parameters: [] }).expect(201);
    const ch = await owner.client.post('/characters', { name: 'Private', capabilityGroupIds: [cap.id] }).expect(201);
    const own = await other.client.post('/characters', { name: 'Mine' }).expect(201);
    const ownCap = await other.client.post('/capabilities', { name: 'mine', type: 'client_function_fire', parameters: [] }).expect(201);

    const attempts = [
      other.client.get(`/characters/${ch.id}`),
      other.client.patch(`/characters/${ch.id}`, { name: 'Hijacked' }),
      other.client.delete(`/characters/${ch.id}`),
      other.client.post(`/characters/${ch.id}/capabilities`, { capabilityId: ownCap.id }),
      other.client.delete(`/characters/${ch.id}/capabilities/${cap.id}`),
      other.client.get(`/capabilities/${cap.id}`),
      other.client.patch(`/capabilities/${cap.id}`, { name: 'hijacked' }),
      other.client.delete(`/capabilities/${cap.id}`),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(404);
      expect(res.text).not.toContain('Private');
      expect(res.text).not.toContain('secret_move');
    }
    // Another project's capability id is as unknown as a missing one.
    const foreignCap = await other.client.post(`/characters/${own.id}/capabilities`, { capabilityId: cap.id }).expect(400);
    expect(foreignCap.error).toMatchObject({ param: 'capabilityId', code: 'capability_not_found' });
    await other.client.post('/characters', { name: 'X', capabilityGroupIds: [cap.id] }).expect(400);

    const listed = await other.client.get('/characters').expect(200);
    expect(listed.map((c: { id: string }) => c.id)).toEqual([own.id]);
    expect((await other.client.get('/capabilities').expect(200)).map((c: { id: string }) => c.id)).toEqual([ownCap.id]);
    // Nothing changed for the owner.
    expect(await owner.client.get(`/characters/${ch.id}`).expect(200)).toEqual(ch);
    expect(await owner.client.get(`/capabilities/${cap.id}`).expect(200)).toEqual(cap);
  });
});

describe.each(BACKENDS)('startup keys on $kind', (backend) => {
  it('ensures project default holds TROUPE_BOOTSTRAP_KEY, once', async () => {
    const bootstrap = 'sk-troupe-bootstrap_key_for_tests_0001';
    const t = await startTestServer(backend, { env: { TROUPE_BOOTSTRAP_KEY: bootstrap } });
    try {
      expect(t.server.initialKey).toBeNull();
      await t.client(bootstrap).get('/characters').expect(200);
      const projects = await t.admin.get('/admin/projects').expect(200);
      expect(projects).toEqual([expect.objectContaining({ name: 'default' })]);
      const keys = await t.admin.get(`/admin/projects/${projects[0].id}/keys`).expect(200);
      expect(keys).toHaveLength(1);
    } finally {
      await t.close();
    }
  });

  it('creates and returns a first key when none exists', async () => {
    const t = await startTestServer(backend);
    try {
      const first = t.server.initialKey;
      expect(first?.key).toMatch(/^sk-troupe-/);
      await t.client(first?.key ?? '').get('/characters').expect(200);
      // Never in the logs.
      expect(t.rawLogs.join('\n')).not.toContain(first?.key);
    } finally {
      await t.close();
    }
  });

  it('hides the admin API when TROUPE_ADMIN_TOKEN is not set', async () => {
    const t = await startTestServer(backend, { env: { TROUPE_ADMIN_TOKEN: '' } });
    try {
      const res = await t.client('anything-at-all-here').post('/admin/projects', { name: 'x' });
      expect(res.status).toBe(404);
      expect(res.body.error.message).toContain('TROUPE_ADMIN_TOKEN');
    } finally {
      await t.close();
    }
  });
});
