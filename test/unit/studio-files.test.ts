import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StudioFiles } from '../../src/http/routes/studio.ts';

describe('StudioFiles', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'troupe-studio-'));
    await writeFile(path.join(root, 'secret.txt'), 'outside the build');
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('says how to build the studio while its build is missing, and serves it once built', async () => {
    const dist = path.join(root, 'dist');
    const files = new StudioFiles(dist);
    await expect(files.reply('/studio')).rejects.toMatchObject({ code: 'service_unavailable', detailCode: 'studio_not_built', message: expect.stringContaining('npm run studio:build') });
    await mkdir(path.join(dist, 'assets'), { recursive: true });
    await writeFile(path.join(dist, 'index.html'), '<!doctype html><title>x</title>');
    await writeFile(path.join(dist, 'assets', 'app-1a2b.js'), 'export {};');
    const page = await files.reply('/studio/scenes/room_1');
    expect(page.raw?.contentType).toBe('text/html; charset=utf-8');
    expect(Buffer.from(page.raw?.text ?? '').toString()).toBe('<!doctype html><title>x</title>');
    const asset = await files.reply('/studio/assets/app-1a2b.js');
    expect(asset.headers?.['cache-control']).toBe('public, max-age=31536000, immutable');
  });

  it('serves only names inside the build, whatever the encoding', async () => {
    const files = new StudioFiles(path.join(root, 'dist'));
    for (const p of ['/studio/..%2Fsecret.txt', '/studio/%2e%2e/secret.txt', '/studio/assets/..%5C..%5Csecret.txt', '/studio/a%00.js', '/studio/%E0%A4%A']) {
      await expect(files.reply(p), p).rejects.toMatchObject({ code: 'not_found', detailCode: 'studio_file_not_found' });
    }
  });
});
