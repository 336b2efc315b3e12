import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import type { ApiClient } from '../support/client.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe.each(BACKENDS)('characters on $kind', (backend) => {
  let t: TestServer;
  let api: ApiClient;
  let projectId: string;

  beforeAll(async () => {
    t = await startTestServer(backend);
    const project = await t.newProject();
    api = project.client;
    projectId = project.projectId;
  });
  afterAll(() => t.close());

  const capability = (name: string) =>
    api.post('/capabilities', { name, type: 'client_function_fire', parameters: [] }).expect(201);

  it('creates a character with defaults and every spec field', async () => {
    const created = await api.post('/characters', { name: 'Mira' }).expect(201);
    expect(created).toEqual({
      id: expect.stringMatching(/^character_[0-9a-z]{26}$/),
      createdAt: expect.stringMatching(ISO),
      projectId,
      name: 'Mira',
      description: null,
      voiceId: null,
      voiceDescription: null,
      hasAvatar: false,
      capabilityGroupIds: [],
    });
    expect(await api.get(`/characters/${created.id}`).expect(200)).toEqual(created);
  });

  it('creates with all optional fields and attached capabilities in order', async () => {
    const a = await capability('open_door');
    const b = await capability('give_item');
    const created = await api
      .post('/characters', {
        name: 'Captain Rook',
        description: 'A gruff harbour master.',
        voiceId: 'voice_42',
        voiceDescription: 'low, gravelly',
        capabilityGroupIds: [b.id, a.id],
      })
      .expect(201);
    expect(created).toMatchObject({
      description: 'A gruff harbour master.',
      voiceId: 'voice_42',
      voiceDescription: 'low, gravelly',
      capabilityGroupIds: [b.id, a.id],
    });
  });

  it('lists characters in creation order with limit/after paging and a Link header', async () => {
    const own = await api.post('/characters', { name: 'Pager' }).expect(201);
    const all = await api.get('/characters').expect(200);
    expect(Array.isArray(all)).toBe(true);
    expect(all.at(-1).id).toBe(own.id);
    const ids = all.map((c: { id: string }) => c.id);
    expect([...ids].sort()).toEqual(ids);

    const first = await api.get('/characters?limit=1');
    expect(first.status).toBe(200);
    expect(first.body).toHaveLength(1);
    expect(first.headers.get('link')).toBe(`</characters?limit=1&after=${ids[0]}>; rel="next"`);
    const second = await api.get(`/characters?limit=1&after=${ids[0]}`).expect(200);
    expect(second[0].id).toBe(ids[1]);
    const last = await api.get(`/characters?limit=100&after=${ids.at(-2)}`);
    expect(last.body.map((c: { id: string }) => c.id)).toEqual([own.id]);
    expect(last.headers.get('link')).toBeNull();
  });

  it('patches only the supplied fields, and null clears nullable ones', async () => {
    const created = await api.post('/characters', { name: 'Ada', description: 'd', voiceId: 'v1' }).expect(201);
    const renamed = await api.patch(`/characters/${created.id}`, { name: 'Ada II' }).expect(200);
    expect(renamed).toEqual({ ...created, name: 'Ada II' });
    const cleared = await api.patch(`/characters/${created.id}`, { description: null, voiceDescription: 'soft' }).expect(200);
    expect(cleared).toEqual({ ...created, name: 'Ada II', description: null, voiceDescription: 'soft' });
    expect(await api.get(`/characters/${created.id}`).expect(200)).toEqual(cleared);
    expect(await api.patch(`/characters/${created.id}`, {}).expect(200)).toEqual(cleared);
  });

  it('replaces the capability set with PATCH capabilityGroupIds', async () => {
    const a = await capability('wave');
    const b = await capability('bow');
    const c = await capability('shrug');
    const created = await api.post('/characters', { name: 'Set', capabilityGroupIds: [a.id, b.id] }).expect(201);
    const replaced = await api.patch(`/characters/${created.id}`, { capabilityGroupIds: [c.id, a.id] }).expect(200);
    expect(replaced.capabilityGroupIds).toEqual([c.id, a.id]);
    const emptied = await api.patch(`/characters/${created.id}`, { capabilityGroupIds: [] }).expect(200);
    expect(emptied.capabilityGroupIds).toEqual([]);
  });

  it('attaches and detaches capabilities, answering the updated character', async () => {
    const a = await capability('jump');
    const b = await capability('duck');
    const created = await api.post('/characters', { name: 'Acro' }).expect(201);
    const once = await api.post(`/characters/${created.id}/capabilities`, { capabilityId: a.id }).expect(200);
    expect(once.capabilityGroupIds).toEqual([a.id]);
    const twice = await api.post(`/characters/${created.id}/capabilities`, { capabilityId: b.id }).expect(200);
    expect(twice.capabilityGroupIds).toEqual([a.id, b.id]);
    const again = await api.post(`/characters/${created.id}/capabilities`, { capabilityId: a.id }).expect(200);
    expect(again.capabilityGroupIds).toEqual([a.id, b.id]);
    const detached = await api.delete(`/characters/${created.id}/capabilities/${a.id}`).expect(200);
    expect(detached.capabilityGroupIds).toEqual([b.id]);
    expect((await api.get(`/characters/${created.id}`).expect(200)).capabilityGroupIds).toEqual([b.id]);

    const notAttached = await api.delete(`/characters/${created.id}/capabilities/${a.id}`).expect(404);
    expect(notAttached.error.code).toBe('capability_not_attached');
  });

  it('rejects unknown capability ids with a 400 naming the id and changes nothing', async () => {
    const a = await capability('sing');
    const created = await api.post('/characters', { name: 'Keep', capabilityGroupIds: [a.id] }).expect(201);
    const bad = await api.patch(`/characters/${created.id}`, { name: 'Changed', capabilityGroupIds: [a.id, 'capability_missing'] }).expect(400);
    expect(bad.error).toMatchObject({ type: 'invalid_request_error', param: 'capabilityGroupIds[1]', code: 'capability_not_found' });
    expect(bad.error.message).toContain('capability_missing');
    expect(await api.get(`/characters/${created.id}`).expect(200)).toEqual(created);

    const onCreate = await api.post('/characters', { name: 'X', capabilityGroupIds: ['capability_nope'] }).expect(400);
    expect(onCreate.error.param).toBe('capabilityGroupIds[0]');
    const onAttach = await api.post(`/characters/${created.id}/capabilities`, { capabilityId: 'capability_nope' }).expect(400);
    expect(onAttach.error).toMatchObject({ param: 'capabilityId', code: 'capability_not_found' });
  });

  it.each([
    [{}, 'name', 'missing_parameter'],
    [{ name: '' }, 'name', 'invalid_parameter'],
    [{ name: 'x'.repeat(201) }, 'name', 'invalid_parameter'],
    [{ name: 42 }, 'name', 'invalid_parameter'],
    [{ name: 'A', description: 7 }, 'description', 'invalid_parameter'],
    [{ name: 'A', voiceId: 1 }, 'voiceId', 'invalid_parameter'],
    [{ name: 'A', capabilityGroupIds: 'x' }, 'capabilityGroupIds', 'invalid_parameter'],
    [{ name: 'A', capabilityGroupIds: ['a', 'a'] }, 'capabilityGroupIds[1]', 'invalid_parameter'],
    [{ name: 'A', hasAvatar: true }, 'hasAvatar', 'unknown_parameter'],
    [{ name: 'A', mood: 'happy' }, 'mood', 'unknown_parameter'],
  ])('rejects invalid create body %j naming %s', async (body, param, code) => {
    const before = (await api.get('/characters?limit=1000').expect(200)).length;
    const res = await api.post('/characters', body).expect(400);
    expect(res.error).toMatchObject({ type: 'invalid_request_error', param, code });
    expect(res.error.message).toContain(param);
    expect((await api.get('/characters?limit=1000').expect(200)).length).toBe(before);
  });

  it('rejects bad JSON, a non-object body and a non-JSON content type', async () => {
    const badJson = await api.post('/characters', '{"name":', { 'content-type': 'application/json' }).expect(400);
    expect(badJson.error.code).toBe('invalid_json');
    const array = await api.post('/characters', [1, 2]).expect(400);
    expect(array.error.type).toBe('invalid_request_error');
    const form = await api.post('/characters', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }).expect(415);
    expect(form.error.code).toBe('unsupported_media_type');
  });

  it('rejects bad paging parameters', async () => {
    expect((await api.get('/characters?limit=0').expect(400)).error.param).toBe('limit');
    expect((await api.get('/characters?limit=abc').expect(400)).error.param).toBe('limit');
    expect((await api.get('/characters?sort=name').expect(400)).error.code).toBe('unknown_parameter');
  });

  it('deletes a character and everything that belongs to it', async () => {
    const a = await capability('vanish');
    const created = await api.post('/characters', { name: 'Gone', capabilityGroupIds: [a.id] }).expect(201);
    expect(await api.delete(`/characters/${created.id}`).expect(200)).toEqual({ id: created.id, deleted: true });
    expect((await api.get(`/characters/${created.id}`).expect(404)).error.code).toBe('character_not_found');
    expect((await api.delete(`/characters/${created.id}`).expect(404)).error.code).toBe('character_not_found');
    expect((await api.patch(`/characters/${created.id}`, { name: 'x' }).expect(404)).error.code).toBe('character_not_found');
    // The capability itself stays; only the link went with the character.
    expect(await api.get(`/capabilities/${a.id}`).expect(200)).toMatchObject({ id: a.id });
    const rows = await t.server.resources.database.db.query.characterCapabilities.findMany();
    expect(rows.filter((r) => r.characterId === created.id)).toEqual([]);
  });

  it('answers 404 for an unknown character id on every character route', async () => {
    const id = 'character_doesnotexist';
    for (const res of [
      await api.get(`/characters/${id}`),
      await api.patch(`/characters/${id}`, { name: 'n' }),
      await api.delete(`/characters/${id}`),
      await api.post(`/characters/${id}/capabilities`, { capabilityId: 'capability_x' }),
      await api.delete(`/characters/${id}/capabilities/capability_x`),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'character_not_found' });
    }
  });
});
