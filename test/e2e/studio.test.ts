import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STUDIO_DIST } from '../../src/http/routes/studio.ts';
import { ensureStudioBuilt, launchChromium, screenshot, type TestBrowser } from '../support/browser.ts';
import { LORE } from '../support/document-fixtures.ts';
import { BACKENDS } from '../support/env.ts';
import { rawGet } from '../support/raw-request.ts';
import { startFakeLiveKit, type FakeLiveKit } from '../support/fake-livekit.ts';
import { ADMIN_TOKEN, startTestServer } from '../support/server.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

// Serving files does not touch the database: one backend (PGlite, always there) is enough for it.
const backend = BACKENDS[0]!;

describe(`studio files on ${backend.kind}`, () => {
  let f: V1Fixture;
  beforeAll(async () => {
    await ensureStudioBuilt();
    f = await startV1Fixture(backend);
  });
  afterAll(() => f.close());

  const get = (p: string, method = 'GET') => fetch(`${f.t.url}${p}`, { method });

  it('serves index.html for the studio and its page routes, uncached, with a CSP without inline scripts', async () => {
    const index = await readFile(path.join(STUDIO_DIST, 'index.html'), 'utf8');
    for (const p of ['/studio', '/studio/', '/studio/characters', '/studio/knowledge/character_x', '/studio/playground/character_x/conv_y']) {
      const res = await get(p);
      expect(res.status, p).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('cache-control')).toBe('no-cache');
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(await res.text()).toBe(index);
    }
    // The built page itself holds no inline script for that policy to block.
    expect(index).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    const head = await get('/studio/scenes', 'HEAD');
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('serves hashed assets as immutable with their content types', async () => {
    const index = await (await get('/studio')).text();
    const assets = [...index.matchAll(/(?:src|href)="(\/studio\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
    expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
    for (const asset of assets) {
      const res = await get(asset);
      expect(res.status, asset).toBe(200);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('content-type')).toBe(asset.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8');
      expect(Buffer.from(await res.arrayBuffer())).toEqual(await readFile(path.join(STUDIO_DIST, asset.replace('/studio/', ''))));
    }
  });

  it('answers 404 for missing files and never leaves the build folder', async () => {
    // Sent as raw request lines: fetch would resolve dot segments (even %2e%2e) before sending.
    for (const p of [
      '/studio/assets/missing.js',
      '/studio/missing.png',
      '/studio/..%2F..%2Fpackage.json',
      '/studio/assets/..%2F..%2F..%2Fpackage.json',
      '/studio/%2e%2e/%2e%2e/package.json',
      '/studio/assets/../../package.json',
      '/studio/assets/%00.js',
      '/studio/assets/%E0%A4%A.js',
      '/studio/..%5C..%5Cpackage.json',
    ]) {
      const res = await rawGet(f.t.url, p);
      expect(res.status, p).toBe(404);
      // Paths deeper than any studio route never reach it (route_not_found); the others are looked up by exact name.
      expect((JSON.parse(res.body) as { error: { code: string } }).error.code, p).toMatch(/^(studio_file|route)_not_found$/);
    }
    // The studio is not part of the API's description.
    const openapi = (await (await get('/openapi.json')).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(openapi.paths).some((p) => p.startsWith('/studio'))).toBe(false);
  });
});

describe.each(BACKENDS)('studio in Chromium on $kind', (backend) => {
  let f: V1Fixture;
  let livekit: FakeLiveKit;
  let chromium: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  const visit = (p: string) => page.goto(`${f.t.url}/studio${p}`);
  /** Each page as the flow left it (with its character, conversation or scene), for the phone pass. */
  const visited = new Map<string, string>();
  const remember = (name: string) => visited.set(name, new URL(page.url()).pathname);
  // Screenshots of the PostgreSQL pass overwrite the PGlite ones: the pages are the same.
  const shoot = (name: string) => screenshot(page, name);

  beforeAll(async () => {
    await ensureStudioBuilt();
    livekit = await startFakeLiveKit();
    f = await startV1Fixture(backend, {
      EMBEDDINGS_MODEL: 'fake-embed-1',
      CAPABILITY_RESULT_TIMEOUT_MS: '30000',
      LIVEKIT_URL: livekit.url,
      LIVEKIT_API_KEY: livekit.apiKey,
      LIVEKIT_API_SECRET: livekit.apiSecret,
    });
    chromium = await launchChromium();
    context = await chromium.browser.newContext({ viewport: DESKTOP });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: f.t.url });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
  });
  afterAll(async () => {
    await chromium?.close();
    await f?.close();
    await livekit?.close();
  });

  it('signs in with an API key and the admin token, kept in sessionStorage only', async () => {
    await visit('/');
    await expect.poll(() => page.getByRole('heading', { name: 'Troupe Studio' }).isVisible()).toBe(true);
    await page.getByLabel('API key').fill('sk-troupe-notavalidkeynotavalidkey');
    await page.keyboard.press('Enter');
    await page.getByRole('alert').filter({ hasText: 'Invalid or revoked API key' }).waitFor();
    await shoot('sign-in');
    // Keyboard only: the key field, then the admin token, then Enter submits.
    await page.getByLabel('API key').fill(f.key);
    await page.getByLabel('API key').press('Tab');
    await page.keyboard.type(ADMIN_TOKEN);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Characters' }).waitFor();
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual(expect.arrayContaining([f.key, ADMIN_TOKEN]));
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(page.url()).not.toContain(f.key);
    await page.getByRole('link', { name: 'Keys' }).waitFor();
  });

  it('creates a capability with a parameter, a character, and attaches one to the other', async () => {
    await page.getByRole('link', { name: 'Capabilities' }).click();
    await page.getByRole('link', { name: 'New capability' }).click();
    await page.getByLabel('Name', { exact: true }).fill('open_door');
    await page.getByLabel('Description', { exact: true }).fill('Open a door of the lighthouse');
    await page.locator('select[name="type"]').selectOption('client_function_call');
    await page.getByRole('button', { name: 'Add parameter' }).click();
    const parameter = page.getByRole('group', { name: 'Parameter 1' });
    await parameter.getByLabel('Name').fill('target');
    await parameter.getByLabel('Description').fill('Which door');
    await parameter.getByLabel('Required').check();
    await page.getByRole('button', { name: 'Create capability' }).click();
    await page.getByRole('heading', { name: 'Edit open_door' }).waitFor();
    expect(await page.locator('select[name="type"]').isDisabled()).toBe(true);
    const [capability] = (await f.api.get('/capabilities').expect(200)) as { name: string; parameters: unknown[] }[];
    expect(capability).toMatchObject({ name: 'open_door', type: 'client_function_call', parameters: [{ name: 'target', type: 'string', description: 'Which door', required: true }] });
    await shoot('capabilities');
    remember('capabilities');
    // An API error is shown next to the form, with the API's message.
    await page.getByRole('link', { name: 'New capability' }).click();
    await page.getByLabel('Name', { exact: true }).fill('open_door');
    await page.getByRole('button', { name: 'Create capability' }).click();
    await page.getByRole('alert').filter({ hasText: 'capability_name_taken' }).waitFor();

    await page.getByRole('link', { name: 'Characters' }).click();
    await page.getByRole('link', { name: 'New character' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Mira');
    await page.getByLabel('Description', { exact: true }).fill('The lighthouse keeper of Gullrock.');
    await page.getByLabel('Voice description').fill('Low and slow');
    await page.getByRole('button', { name: 'Create character' }).click();
    await page.getByRole('heading', { name: 'Edit Mira' }).waitFor();
    await page.getByLabel('Attach a capability').selectOption({ label: 'open_door (client_function_call)' });
    await page.getByRole('button', { name: 'Attach', exact: true }).click();
    await page.getByRole('button', { name: 'Detach open_door' }).waitFor();
    const [mira] = (await f.api.get('/characters').expect(200)) as { capabilityGroupIds: string[] }[];
    expect(mira).toMatchObject({ name: 'Mira', description: 'The lighthouse keeper of Gullrock.', voiceDescription: 'Low and slow' });
    expect(mira?.capabilityGroupIds).toHaveLength(1);
    await shoot('characters');
    remember('characters');
  });

  it('uploads a text document by drag and drop and shows it turn ready with its chunks', async () => {
    await page.getByRole('link', { name: 'Knowledge of Mira' }).click();
    // What a file dropped from the desktop carries. (Page code is passed as text: the tests compile without the DOM types.)
    const drop = await page.evaluateHandle(
      `(() => { const data = new DataTransfer(); data.items.add(new File([${JSON.stringify(LORE)}], 'lighthouse.md', { type: 'text/markdown' })); return data; })()`,
    );
    await page.dispatchEvent('.dropzone', 'drop', { dataTransfer: drop });
    const row = page.locator('tr[data-document="lighthouse.md"]');
    await row.getByRole('status').filter({ hasText: 'ready' }).waitFor();
    expect(Number(await row.locator('td').nth(2).textContent())).toBeGreaterThan(0);
    // A refused upload says why, next to that file.
    await page.getByLabel('Upload documents').setInputFiles({ name: 'map.png', mimeType: 'image/png', buffer: Buffer.from('not a picture at all') });
    await page.locator('.upload', { hasText: 'map.png' }).getByRole('alert').waitFor();
    expect(await page.locator('.upload', { hasText: 'map.png' }).getByRole('alert').textContent()).toContain('(unsupported_media_type)');
    await page.getByRole('button', { name: 'Dismiss' }).click();
    await shoot('knowledge');
    remember('knowledge');
  });

  it('streams a reply with a citation, shows a capability card and answers it, and reloads the history', async () => {
    await page.getByRole('link', { name: 'Playground' }).click();
    await page.getByLabel('Character').selectOption({ label: 'Mira' });
    await page.getByRole('button', { name: 'New conversation' }).click();
    await page.getByRole('status').filter({ hasText: /^connected$/ }).waitFor();

    const answer = 'The password of the lamp room is AMBERGRIS-SEVEN, and I keep it to myself.';
    f.upstream.script({ text: answer, chunkDelayMs: 60 });
    await page.getByLabel('Say something to Mira').fill('What is the password of the lamp room?');
    await page.getByLabel('Say something to Mira').press('Enter');
    const reply = page.locator('.bubble.character').last();
    // Streaming: the bubble shows part of the reply while it is still busy, then all of it.
    await page.locator('.bubble.character[aria-busy="true"] p').filter({ hasText: /^The password(?![\s\S]*to myself\.)/ }).waitFor();
    await page.locator('.bubble.character[aria-busy="false"]').filter({ hasText: answer }).waitFor();
    const sources = reply.locator('.citations');
    await sources.getByText('lighthouse.md').first().waitFor();
    expect(await sources.locator('blockquote').allTextContents()).toEqual(expect.arrayContaining([expect.stringContaining('AMBERGRIS-SEVEN')]));
    await shoot('playground');
    remember('playground');

    f.upstream.script({ toolCalls: [{ name: 'open_door', arguments: { target: 'north gate' } }] }, { text: 'The north gate creaks open.' });
    await page.getByLabel('Say something to Mira').fill('Open the north gate, please.');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const card = page.getByRole('listitem', { name: 'Capability call open_door' });
    await card.getByText('"north gate"').waitFor();
    await shoot('playground-capability');
    await card.getByLabel('Result (JSON) for open_door').fill('{"opened": tru');
    await card.getByRole('button', { name: 'Send result' }).click();
    await card.getByRole('alert').filter({ hasText: 'Not valid JSON' }).waitFor();
    await card.getByLabel('Result (JSON) for open_door').fill('{"opened": true}');
    await card.getByRole('button', { name: 'Send result' }).click();
    await page.locator('.bubble.character[aria-busy="false"]').filter({ hasText: 'The north gate creaks open.' }).waitFor();
    const toolMessage = (f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)?.body as { messages: { role: string; content: string }[] }).messages.find((m) => m.role === 'tool');
    expect(toolMessage?.content).toContain('"opened":true');

    f.upstream.script({ text: 'Mira stays in character and guards her secret.' });
    await page.getByLabel('Analysis mode').check();
    await page.getByLabel('Ask about the conversation (not stored)').fill('Is Mira consistent?');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('.bubble.character.analysis').filter({ hasText: 'guards her secret' }).waitFor();
    await page.getByLabel('Analysis mode').uncheck();

    await page.reload();
    await page.getByRole('status').filter({ hasText: /^connected$/ }).waitFor();
    const texts = await page.locator('.log .bubble p').allTextContents();
    expect(texts).toEqual(['What is the password of the lamp room?', answer, 'Open the north gate, please.', 'The north gate creaks open.']);
  });

  it('runs a scene with two characters: a line addressed to one is answered by that one in the transcript', async () => {
    await f.api.post('/characters', { name: 'Rook', description: 'A gruff harbour master.' }).expect(201);
    await page.getByRole('link', { name: 'Scenes' }).click();
    await page.getByLabel('Scene name').fill('The Harbour');
    await page.getByRole('button', { name: 'Create scene' }).click();
    await page.getByRole('heading', { name: 'The Harbour' }).waitFor();
    for (const name of ['Mira', 'Rook']) {
      await page.getByLabel('Add a character').selectOption({ label: name });
      await page.getByRole('button', { name: 'Add', exact: true }).click();
      await page.getByRole('button', { name: `Remove ${name}` }).waitFor();
    }
    await page.getByRole('status').filter({ hasText: /^live$/ }).waitFor();
    f.upstream.script({ text: 'Salted cod and rope, as always.', chunkDelayMs: 150 });
    await page.getByLabel('Speak as').fill('Ana');
    await page.getByLabel('Line (name a character to address it)').fill('Rook, what cargo came in today?');
    await page.getByRole('button', { name: 'Say', exact: true }).click();
    // Who is speaking shows while the line streams in.
    await page.locator('.chips li.speaking').filter({ hasText: 'Rook' }).waitFor();
    await shoot('scenes-speaking');
    const transcript = page.getByRole('list', { name: 'Transcript' });
    // The stored line, not the one still streaming (that one is aria-busy).
    await transcript.locator('.bubble.character:not([aria-busy])').filter({ hasText: 'Salted cod and rope, as always.' }).waitFor();
    await transcript.locator('[aria-busy]').waitFor({ state: 'detached' });
    const lines = await transcript.locator('.bubble').evaluateAll((items) => items.map((i) => [i.querySelector('.who')?.textContent, i.querySelector('p')?.textContent]));
    expect(lines, JSON.stringify(lines)).toEqual([
      ['Ana', 'Rook, what cargo came in today?'],
      ['Rook', 'Salted cod and rope, as always.'],
    ]);
    await shoot('scenes');
    remember('scenes');
    // Voice, against the fake LiveKit: a join token to copy, then one agent dispatch per character.
    const roomId = new URL(page.url()).pathname.split('/').at(-1) ?? '';
    await page.getByRole('button', { name: 'Get a join token' }).click();
    const token = await page.locator('code.secret').textContent();
    expect(token?.split('.')).toHaveLength(3);
    await page.getByRole('button', { name: 'Copy join token' }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(token);
    await page.getByRole('button', { name: 'Start the scene' }).click();
    await page.getByRole('status').filter({ hasText: 'Started' }).waitFor();
    expect([...livekit.dispatches.values()].filter((d) => d.room === roomId)).toHaveLength(2);
    await page.getByRole('button', { name: 'Remove Mira' }).click();
    await page.getByRole('button', { name: 'Remove Mira' }).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'End scene' }).click();
    await page.getByRole('button', { name: 'Yes, end scene' }).click();
    await page.getByText('The scene has ended.').waitFor();
  });

  it('fits every page on a phone screen', async () => {
    await page.setViewportSize(PHONE);
    for (const name of ['characters', 'capabilities', 'knowledge', 'playground', 'scenes', 'keys']) {
      await page.goto(`${f.t.url}${visited.get(name) ?? `/studio/${name}`}`);
      await page.locator('main h1').waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.evaluate<number>('document.documentElement.scrollWidth'), name).toBeLessThanOrEqual(PHONE.width);
      await shoot(name);
    }
    await page.setViewportSize(DESKTOP);
  });

  it('says which variable to set when inference or LiveKit is not configured', async () => {
    const bare = await startTestServer(backend);
    const other = await chromium.browser.newContext({ viewport: DESKTOP });
    try {
      const project = await bare.newProject();
      const character = await project.client.post('/characters', { name: 'Quiet' }).expect(201);
      const tab = await other.newPage();
      tab.setDefaultTimeout(15_000);
      await tab.goto(`${bare.url}/studio/playground/${character.id as string}`);
      await tab.getByLabel('API key').fill(project.key);
      await tab.getByLabel('API key').press('Enter');
      await tab.getByRole('button', { name: 'New conversation' }).click();
      await tab.getByRole('status').filter({ hasText: /^connected$/ }).waitFor();
      await tab.getByLabel('Say something to Quiet').fill('Hello?');
      await tab.getByLabel('Say something to Quiet').press('Enter');
      await tab.getByRole('alert').filter({ hasText: 'set INFERENCE_BASE_URL' }).waitFor();
      await screenshot(tab, 'playground-not-configured');
      await tab.getByRole('link', { name: 'Scenes' }).click();
      await tab.getByLabel('Scene name').fill('Quiet room');
      await tab.getByRole('button', { name: 'Create scene' }).click();
      await tab.getByLabel('Add a character').selectOption({ label: 'Quiet' });
      await tab.getByRole('button', { name: 'Add', exact: true }).click();
      await tab.getByRole('button', { name: 'Remove Quiet' }).waitFor();
      await tab.getByRole('button', { name: 'Get a join token' }).click();
      await tab.getByRole('alert').filter({ hasText: 'LIVEKIT_URL' }).waitFor();
      await tab.getByRole('button', { name: 'Start the scene' }).click();
      await tab.getByRole('alert').filter({ hasText: 'LIVEKIT_URL' }).nth(1).waitFor();
      await screenshot(tab, 'scenes-not-configured');
    } finally {
      await other.close();
      await bare.close();
    }
  });

  it('creates a key shown once, and asks for a new key once the studio\'s own key is revoked', async () => {
    await visit('/keys');
    await page.getByLabel('Project', { exact: true }).selectOption(f.projectId);
    await page.getByLabel('Key name (optional)').fill('build server');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.locator('.notice code.secret').textContent();
    expect(secret).toMatch(/^sk-troupe-/);
    await page.getByRole('button', { name: 'Copy key' }).click();
    await page.getByRole('button', { name: 'Copied', exact: true }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(secret);
    await shoot('keys');
    remember('keys');
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.locator('code.secret').count()).toBe(0);

    const own = page.locator('tr', { hasText: "this studio's key" });
    await own.getByRole('button', { name: 'Revoke' }).click();
    await own.getByRole('button', { name: 'Yes, revoke' }).click();
    await page.getByRole('alert').filter({ hasText: 'Invalid or revoked API key' }).waitFor();
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await shoot('signed-out');
    await page.setViewportSize(PHONE);
    await shoot('signed-out');
    await page.setViewportSize(DESKTOP);
    // The new key works.
    await page.getByLabel('API key').fill(secret ?? '');
    await page.getByLabel('API key').press('Enter');
    await page.getByText('Sign in again with the admin token').waitFor();
    await page.getByRole('link', { name: 'Characters' }).click();
    await page.getByRole('link', { name: /^Mira/ }).waitFor();
    expect(await page.getByRole('link', { name: 'Keys' }).count()).toBe(0);
  });
});
