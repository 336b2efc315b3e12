import { existsSync } from 'node:fs';
import { mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it). Playwright's own browsers cannot be downloaded here. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Flags that work as root on these machines; without the background-networking ones Chromium's
 * own connections are refused by the closed network, many at a time.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/** Headless Chromium; Playwright gives it a new, empty --user-data-dir of its own and removes it on close. */
export async function launchChromium(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does it)`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  return { browser, close: () => browser.close() };
}

/** Where the studio tests put their screenshots (gitignored): look at them after a run. */
export const SCREENSHOTS = path.resolve(import.meta.dirname, '../.artifacts/studio');

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOTS, { recursive: true });
  const size = page.viewportSize();
  const file = path.join(SCREENSHOTS, `${name}-${size?.width ?? 0}x${size?.height ?? 0}.png`);
  await page.screenshot({ path: file, fullPage: false });
  return file;
}

/**
 * Builds the studio when its build is missing or older than its sources (`npm ci` builds it; a
 * developer who edited studio/ and runs the tests gets what they edited, not a stale bundle).
 */
export async function ensureStudioBuilt(): Promise<void> {
  const studio = path.resolve(import.meta.dirname, '../../studio');
  const built = await stat(path.join(studio, 'dist/index.html')).then((s) => s.mtimeMs, () => 0);
  const sources = await readdir(path.join(studio, 'src'), { recursive: true, withFileTypes: true });
  const inputs = [path.join(studio, 'index.html'), path.join(studio, 'vite.config.ts'), ...sources.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))];
  const newest = Math.max(...(await Promise.all(inputs.map(async (file) => (await stat(file)).mtimeMs))));
  if (built >= newest) return;
  const { build } = await import('vite');
  await build({ configFile: path.join(studio, 'vite.config.ts'), logLevel: 'warn' });
}
