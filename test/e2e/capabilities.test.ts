import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../support/client.ts';
import { BACKENDS } from '../support/env.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.each(BACKENDS)('capabilities on $kind', (backend) => {
  let t: TestServer;
  let api: ApiClient;
  let projectId: string;

  beforeAll(async () => {
    t = await startTestServer(backend);
    ({ client: api, projectId } = await t.newProject());
  });
  afterAll(() => t.close());

  const params = [
    { name: 'item', type: 'string', description: 'What to give', required: true },
    { name: 'count', type: 'integer', description: null, required: false },
  ];

  it('creates, retrieves, lists, patches and deletes a capability', async () => {
    const created = await api
      .post('/capabilities', { name: 'give_item', description: 'Hand an item to the player', type: 'client_function_call', parameters: params })
      .expect(201);
    expect(created).toEqual({
      id: expect.stringMatching(/^capability_[0-9a-z]{26}$/),
      createdAt: expect.any(String),
      projectId,
      name: 'give_item',
      description: 'Hand an item to the player',
      type: 'client_function_call',
      parameters: params,
      webhookUrl: null,
    });
    expect(await api.get(`/capabilities/${created.id}`).expect(200)).toEqual(created);
    expect((await api.get('/capabilities').expect(200)).map((c: { id: string }) => c.id)).toContain(created.id);

    const patched = await api
      .patch(`/capabilities/${created.id}`, { description: null, parameters: [{ name: 'x', type: 'boolean', required: true }] })
      .expect(200);
    expect(patched).toEqual({ ...created, description: null, parameters: [{ name: 'x', type: 'boolean', description: null, required: true }] });
    const renamed = await api.patch(`/capabilities/${created.id}`, { name: 'hand-over' }).expect(200);
    expect(renamed.name).toBe('hand-over');

    expect(await api.delete(`/capabilities/${created.id}`).expect(200)).toEqual({ id: created.id, deleted: true });
    expect((await api.get(`/capabilities/${created.id}`).expect(404)).error.code).toBe('capability_not_found');
  });

  it('accepts every capability type and parameter type; description and required default', async () => {
    for (const type of ['client_function_fire', 'client_function_call', 'server_function_fire', 'server_function_call']) {
      const c = await api
        .post('/capabilities', {
          name: `t_${type}`,
          type,
          ...(type.startsWith('server') ? { webhookUrl: 'https://game.example/hooks/troupe' } : {}),
          parameters: ['string', 'number', 'boolean', 'integer'].map((pt) => ({ name: `p_${pt}`, type: pt })),
        })
        .expect(201);
      expect(c.type).toBe(type);
      expect(c.description).toBeNull();
      expect(c.webhookUrl).toBe(type.startsWith('server') ? 'https://game.example/hooks/troupe' : null);
      expect(c.parameters[0]).toEqual({ name: 'p_string', type: 'string', description: null, required: false });
    }
  });

  it.each([
    [{ type: 'client_function_fire', parameters: [] }, 'name', 'missing_parameter'],
    [{ name: 'has space', type: 'client_function_fire', parameters: [] }, 'name', 'invalid_parameter'],
    [{ name: 'x'.repeat(65), type: 'client_function_fire', parameters: [] }, 'name', 'invalid_parameter'],
    [{ name: 'ok', parameters: [] }, 'type', 'missing_parameter'],
    [{ name: 'ok', type: 'telepathy', parameters: [] }, 'type', 'invalid_parameter'],
    [{ name: 'ok', type: 'client_function_fire' }, 'parameters', 'missing_parameter'],
    [{ name: 'ok', type: 'client_function_fire', parameters: {} }, 'parameters', 'invalid_parameter'],
    [{ name: 'ok', type: 'client_function_fire', parameters: [{ name: 'a', type: 'object' }] }, 'parameters[0].type', 'invalid_parameter'],
    [{ name: 'ok', type: 'client_function_fire', parameters: [{ type: 'string' }] }, 'parameters[0].name', 'missing_parameter'],
    [{ name: 'ok', type: 'client_function_fire', parameters: [{ name: '1bad', type: 'string' }] }, 'parameters[0].name', 'invalid_parameter'],
    [
      { name: 'ok', type: 'client_function_fire', parameters: [{ name: 'a', type: 'string' }, { name: 'a', type: 'number' }] },
      'parameters[1].name',
      'invalid_parameter',
    ],
    [{ name: 'ok', type: 'client_function_fire', parameters: [{ name: 'a', type: 'string', required: 'yes' }] }, 'parameters[0].required', 'invalid_parameter'],
    [{ name: 'ok', type: 'client_function_fire', parameters: [{ name: 'a', type: 'string', enum: [1] }] }, 'parameters[0].enum', 'unknown_parameter'],
    [{ name: 'ok', type: 'server_function_call', parameters: [] }, 'webhookUrl', 'invalid_parameter'],
    [{ name: 'ok', type: 'server_function_fire', parameters: [], webhookUrl: 'ftp://x.example/a' }, 'webhookUrl', 'invalid_parameter'],
    [{ name: 'ok', type: 'client_function_call', parameters: [], webhookUrl: 'https://x.example/a' }, 'webhookUrl', 'invalid_parameter'],
  ])('rejects invalid create body %j naming %s', async (body, param, code) => {
    const before = (await api.get('/capabilities?limit=1000').expect(200)).length;
    const res = await api.post('/capabilities', body).expect(400);
    expect(res.error).toMatchObject({ type: 'invalid_request_error', param, code });
    expect((await api.get('/capabilities?limit=1000').expect(200)).length).toBe(before);
  });

  it('refuses to change the type with PATCH and changes nothing', async () => {
    const c = await api.post('/capabilities', { name: 'fixed_type', type: 'server_function_fire', parameters: [], webhookUrl: 'http://hooks.internal/fire' }).expect(201);
    const res = await api.patch(`/capabilities/${c.id}`, { type: 'client_function_fire', name: 'renamed' }).expect(400);
    expect(res.error).toMatchObject({ param: 'type', type: 'invalid_request_error' });
    expect(res.error.message).toContain('cannot be changed');
    expect(await api.get(`/capabilities/${c.id}`).expect(200)).toEqual(c);
  });

  it('keeps a server capability deliverable: its webhookUrl can change but not go away', async () => {
    const c = await api
      .post('/capabilities', { name: 'open_gate', type: 'server_function_call', parameters: [], webhookUrl: 'https://a.example/hook' })
      .expect(201);
    expect((await api.patch(`/capabilities/${c.id}`, { webhookUrl: 'https://b.example/hook' }).expect(200)).webhookUrl).toBe('https://b.example/hook');
    const cleared = await api.patch(`/capabilities/${c.id}`, { webhookUrl: null }).expect(400);
    expect(cleared.error.param).toBe('webhookUrl');
    expect((await api.get(`/capabilities/${c.id}`).expect(200)).webhookUrl).toBe('https://b.example/hook');
  });

  it('answers 409 for a second capability with the same name, on create and rename', async () => {
    await api.post('/capabilities', { name: 'unique_one', type: 'client_function_fire', parameters: [] }).expect(201);
    const other = await api.post('/capabilities', { name: 'unique_two', type: 'client_function_fire', parameters: [] }).expect(201);
    const dup = await api.post('/capabilities', { name: 'unique_one', type: 'server_function_call', parameters: [], webhookUrl: 'https://h.example/x' }).expect(409);
    expect(dup.error).toMatchObject({ param: 'name', code: 'capability_name_taken' });
    const rename = await api.patch(`/capabilities/${other.id}`, { name: 'unique_one' }).expect(409);
    expect(rename.error.code).toBe('capability_name_taken');
  });

  it('detaches a deleted capability from every character', async () => {
    const keep = await api.post('/capabilities', { name: 'stays', type: 'client_function_fire', parameters: [] }).expect(201);
    const drop = await api.post('/capabilities', { name: 'goes', type: 'client_function_fire', parameters: [] }).expect(201);
    const c1 = await api.post('/characters', { name: 'One', capabilityGroupIds: [drop.id, keep.id] }).expect(201);
    const c2 = await api.post('/characters', { name: 'Two', capabilityGroupIds: [drop.id] }).expect(201);
    // Warm the read cache so the test also shows it is invalidated.
    await api.get(`/characters/${c1.id}`).expect(200);
    await api.get(`/characters/${c2.id}`).expect(200);
    await api.delete(`/capabilities/${drop.id}`).expect(200);
    expect((await api.get(`/characters/${c1.id}`).expect(200)).capabilityGroupIds).toEqual([keep.id]);
    expect((await api.get(`/characters/${c2.id}`).expect(200)).capabilityGroupIds).toEqual([]);
  });

  it('answers 404 for an unknown capability on every capability route', async () => {
    for (const res of [
      await api.get('/capabilities/capability_nope'),
      await api.patch('/capabilities/capability_nope', { name: 'x' }),
      await api.delete('/capabilities/capability_nope'),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('capability_not_found');
    }
  });
});
