import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { BACKENDS } from '../support/env.ts';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

describe.each(BACKENDS)('troupe CLI on $kind', (backend) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(backend);
  });
  afterAll(() => t.close());

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await runCli(args, { TROUPE_URL: t.url, TROUPE_ADMIN_TOKEN: ADMIN_TOKEN }, (s) => (out += s), (s) => (err += s));
    return { code, out, err };
  }

  it('creates a project and a key that works, lists keys without secrets, and revokes', async () => {
    const project = JSON.parse((await cli('projects', 'create', 'Studio', '--json')).out);
    expect(project).toMatchObject({ id: expect.stringMatching(/^proj_/), name: 'Studio' });
    expect((await cli('projects', 'list')).out).toContain(`${project.id}\tStudio`);

    const created = await cli('keys', 'create', project.id, '--name', 'ci');
    expect(created.code).toBe(0);
    const key = /sk-troupe-[A-Za-z0-9_-]+/.exec(created.out)?.[0] ?? '';
    await t.client(key).get('/characters').expect(200);

    const listed = await cli('keys', 'list', project.id);
    expect(listed.out).toMatch(/key_\w+\tsk-troupe-\S{4}…\tci\tactive/);
    expect(listed.out).not.toContain(key);

    const keyId = JSON.parse((await cli('keys', 'list', project.id, '--json')).out)[0].id as string;
    expect((await cli('keys', 'revoke', keyId)).code).toBe(0);
    await t.client(key).get('/characters').expect(401);
    expect((await cli('keys', 'list', project.id)).out).toContain('revoked');
  });

  it('reports server errors, usage errors and a missing token clearly', async () => {
    const missing = await cli('keys', 'list', 'proj_nope');
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("No project with id 'proj_nope'");
    expect((await cli('keys', 'create')).code).toBe(2);
    expect((await cli('dance')).err).toContain('Unknown command');
    let err = '';
    expect(await runCli(['projects', 'list'], { TROUPE_URL: t.url }, () => {}, (s) => (err += s))).toBe(2);
    expect(err).toContain('TROUPE_ADMIN_TOKEN');
  });
});
