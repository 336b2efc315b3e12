import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../support/env.ts';
import { GameClient } from '../support/game-client.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';
import { openSocket } from '../support/ws-client.ts';

/**
 * The text rule at every boundary (src/input/text.ts): invalid UTF-8, NUL, lone surrogates and
 * deep nesting get a 400 (HTTP) or an `error` event (WebSocket, Colyseus) naming the field, and
 * nothing is stored. A failure to store or answer a live client's message is never silent.
 */
describe.each(BACKENDS)('hostile text on $kind', (backend) => {
  let f: V1Fixture;
  let character: { id: string };
  let conversationId: string;
  let projectId: string;
  let wsBase: string;

  beforeAll(async () => {
    f = await startV1Fixture(backend);
    character = await f.api.post('/characters', { name: 'Warden' }).expect(201);
    conversationId = (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id;
    f.upstream.script({ text: 'Hello there.' });
    await f.api.post(`/conversations/${conversationId}/messages`, { content: 'first' }).expect(200);
    projectId = (await f.t.admin.get('/admin/projects').expect(200)).at(-1).id;
    wsBase = f.t.url.replace('http://', 'ws://');
  });
  afterAll(() => f.close());

  /** Everything a hostile request could have changed. */
  const snapshot = async () => ({
    characters: await f.api.get('/characters?limit=100').expect(200),
    capabilities: await f.api.get('/capabilities?limit=100').expect(200),
    conversation: await f.api.get(`/conversations/${conversationId}`).expect(200),
    projects: await f.t.admin.get('/admin/projects').expect(200),
    keys: await f.t.admin.get(`/admin/projects/${projectId}/keys`).expect(200),
  });
  const raw = (path: string, body: Uint8Array | string, key = f.key) =>
    fetch(f.t.url + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });

  it('answers NUL in any string field with a 400 naming the field, on every HTTP surface', async () => {
    const before = await snapshot();
    const cases: [string, string, unknown, string, boolean?][] = [
      ['POST', '/characters', { name: 'Ann\u0000a' }, 'name'],
      ['POST', '/characters', { name: 'Anna', description: 'tall\u0000' }, 'description'],
      ['PATCH', `/characters/${character.id}`, { voiceDescription: '\u0000gravel' }, 'voiceDescription'],
      ['POST', '/capabilities', { name: 'wave', type: 'client_function_fire', description: 'x\u0000', parameters: [] }, 'description'],
      ['POST', '/capabilities', { name: 'wave', type: 'client_function_fire', parameters: [{ name: 'hand', type: 'string', description: '\u0000' }] }, 'parameters[0].description'],
      ['POST', `/conversations/${conversationId}/messages`, { content: 'hi\u0000there' }, 'content'],
      ['POST', '/v1/chat/completions', { model: character.id, messages: [{ role: 'user', content: 'a\u0000' }] }, 'messages[0].content'],
      ['POST', '/perform', { npcId: character.id, history: [{ role: 'player', content: '\u0000' }] }, 'history[0].content'],
      ['POST', '/admin/projects', { name: 'evil\u0000' }, 'name', true],
      ['POST', `/admin/projects/${projectId}/keys`, { name: 'k\u0000' }, 'name', true],
    ];
    for (const [method, path, body, param, admin] of cases) {
      const res = await (admin ? f.t.admin : f.api).request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'null_character', param });
      expect(res.body.error.message).toContain(param);
    }
    // Object keys are text too, and the param shows the NUL escaped.
    const key = await f.api.post('/perform', { npcId: character.id, history: [], 'x\u0000': 1 }).expect(400);
    expect(key.error).toMatchObject({ code: 'null_character', param: 'x\\u0000' });
    expect(await snapshot()).toEqual(before);
  });

  it('refuses invalid UTF-8 bodies and query strings instead of storing U+FFFD', async () => {
    const before = await snapshot();
    const bad = (json: string) => Buffer.concat([Buffer.from(json.split('@')[0] as string), Buffer.from([0xff, 0xfe]), Buffer.from(json.split('@')[1] as string)]);
    for (const [path, body] of [
      ['/characters', bad('{"name":"bad @"}')],
      [`/conversations/${conversationId}/messages`, bad('{"content":"bad @"}')],
      ['/v1/chat/completions', bad(`{"model":"${character.id}","messages":[{"role":"user","content":"@"}]}`)],
      ['/perform', bad(`{"npcId":"${character.id}","history":[{"role":"player","content":"@"}]}`)],
    ] as const) {
      const res = await raw(path, body);
      expect(res.status, path).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_utf8' });
    }
    const query = await f.api.get('/characters?after=%FF%FE').expect(400);
    expect(query.error.code).toBe('invalid_utf8');
    expect(await snapshot()).toEqual(before);
  });

  it('refuses lone surrogates and values nested deeper than 64 levels', async () => {
    const before = await snapshot();
    const surrogate = await raw('/characters', '{"name":"half \\ud800 a pair"}');
    expect(surrogate.status).toBe(400);
    expect(((await surrogate.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_unicode', param: 'name' });
    const deep = `{"model":"${character.id}","messages":[{"role":"user","content":"hi"}],"metadata":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    const nested = await raw('/v1/chat/completions', deep);
    expect(nested.status).toBe(400);
    expect(((await nested.json()) as { error: { code: string } }).error.code).toBe('nested_too_deeply');
    expect(await snapshot()).toEqual(before);
  });

  it('answers hostile WebSocket frames with an error event and keeps the socket open', async () => {
    const before = await snapshot();
    const socket = await openSocket(`${wsBase}/conversations/${conversationId}/ws?token=${f.key}`);
    expect(await socket.next()).toEqual({ type: 'ready' });
    socket.send({ content: 'a\u0000b' });
    expect(await socket.next('error')).toMatchObject({ code: 'null_character', param: 'content' });
    socket.send({ type: 'capability_result', callId: 'c1', result: { note: '\u0000' } });
    expect(await socket.next('error')).toMatchObject({ code: 'null_character', param: 'result.note' });
    socket.send('{"content":"\\udfff"}');
    expect(await socket.next('error')).toMatchObject({ code: 'invalid_unicode', param: 'content' });
    // Invalid UTF-8 in a binary frame: the same answer on both engines.
    socket.ws.send(Buffer.concat([Buffer.from('{"content":"x'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), { binary: true });
    expect(await socket.next('error')).toMatchObject({ code: 'invalid_utf8' });
    expect(await snapshot()).toEqual(before);
    f.upstream.script({ text: 'Still here.' });
    socket.send({ content: 'ok' });
    expect(await socket.reply()).toBe('Still here.');
    await socket.close();
  });

  it('answers invalid UTF-8 in a text frame with an error event on node; uWS drops such a connection itself', async () => {
    const socket = await openSocket(`${wsBase}/conversations/${conversationId}/ws?token=${f.key}`);
    await socket.next('ready');
    const closed = new Promise<number>((resolve) => socket.ws.once('close', (code) => resolve(code)));
    socket.ws.send(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d]), { binary: false });
    if (f.t.server.engine === 'node') {
      expect(await socket.next('error')).toMatchObject({ code: 'invalid_utf8' });
      await socket.close();
    } else {
      // uWebSockets.js validates text frames before Troupe sees them (RFC 6455 section 8.1).
      expect(await closed).toBe(1006);
    }
  });

  it('answers hostile Colyseus messages with an error event and keeps the client joined', async () => {
    const before = await snapshot();
    const game = await GameClient.join(f.t.url, f.key, conversationId);
    game.send('message', { content: 'x\u0000' });
    expect(await game.next('error')).toMatchObject({ code: 'null_character', param: 'content' });
    // A frame the SDK would never make: ROOM_DATA (13), type "message", {content: "a\xff"}.
    game.room.connection.send(new Uint8Array([13, 0xa7, ...Buffer.from('message'), 0x81, 0xa7, ...Buffer.from('content'), 0xa2, 0x61, 0xff]));
    expect(await game.next('error')).toMatchObject({ code: 'invalid_utf8' });
    expect((await snapshot()).conversation).toEqual(before.conversation);
    f.upstream.script({ text: 'Joined still.' });
    game.send('message', { content: 'ok' });
    expect(await game.reply()).toBe('Joined still.');
    await game.leave();
  });

  it('drops NUL from model output so the reply is stored and ends with done', async () => {
    const id = (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id;
    f.upstream.script({ text: 'Zero\u0000 width' });
    const reply = await f.api.post(`/conversations/${id}/messages`, { content: 'speak' }).expect(200);
    expect(reply.characterMessage.content).toBe('Zero width');
  });

  it('tells the sender when its message cannot be stored, and every listener when a reply cannot', async () => {
    const { db } = f.t.server.resources.database;
    // A real database failure: a trigger refuses chosen rows, as a full disk or a constraint would.
    await db.execute(sql.raw(`
      create or replace function troupe_test_refuse() returns trigger language plpgsql as $$
      begin
        if new.content in ('refuse me', 'Refused reply.') then raise exception 'refused by test trigger'; end if;
        return new;
      end $$`));
    await db.execute(sql.raw('create trigger troupe_test_refuse before insert on messages for each row execute function troupe_test_refuse()'));
    try {
      const id = (await f.api.post('/conversations', { characterId: character.id }).expect(201)).id;
      const socket = await openSocket(`${wsBase}/conversations/${id}/ws?token=${f.key}`);
      await socket.next('ready');
      const game = await GameClient.join(f.t.url, f.key, id);
      socket.send({ content: 'refuse me' });
      expect(await socket.next('error')).toMatchObject({ type: 'error', code: 'internal_error' });
      game.send('message', { content: 'refuse me' });
      expect(await game.next('error')).toMatchObject({ type: 'error', code: 'internal_error' });
      expect((await f.api.post(`/conversations/${id}/messages`, { content: 'refuse me' })).status).toBe(500);
      // The reply streams, then cannot be stored: every listener gets `error`, never silence.
      f.upstream.script({ text: 'Refused reply.' });
      socket.send({ content: 'fine' });
      expect(await socket.next('error')).toMatchObject({ code: 'internal_error' });
      expect(await game.next('error')).toMatchObject({ code: 'internal_error' });
      const stored = await f.api.get(`/conversations/${id}`).expect(200);
      expect(stored.messages.map((m: { content: string }) => m.content)).toEqual(['fine']);
      await socket.close();
      await game.leave();
    } finally {
      await db.execute(sql.raw('drop trigger if exists troupe_test_refuse on messages'));
    }
  });
});
