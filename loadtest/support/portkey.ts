/**
 * Portkey's open-source AI gateway (Node/Hono), the peer bench:gateway compares with: installed on
 * first use into a cache folder with `npm install --prefix` (never a project dependency), started
 * with `--headless` on a port of its own, and pointed at the fake upstream per request by headers.
 */
import { access } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { execFileAsync, freePort, launchPolled, type Launched } from './children.ts';
import { troupeEnv } from './troupe.ts';

const PORTKEY_VERSION = '1.15.2';

/** The gateway's start script, installing it first when the cache folder lacks it. */
export async function installPortkey(log: (line: string) => void): Promise<string> {
  const dir = join(process.env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache'), 'troupe-bench', `portkey-${PORTKEY_VERSION}`);
  const script = join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  if (await access(script).then(() => true, () => false)) return script;
  log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into ${dir}`);
  await execFileAsync('npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', `@portkey-ai/gateway@${PORTKEY_VERSION}`], { timeout: 300_000, maxBuffer: 1 << 24 });
  await access(script);
  return script;
}

export async function startPortkey(script: string): Promise<Launched> {
  const port = await freePort();
  const env = troupeEnv({ NODE_ENV: 'production' });
  return launchPolled({ name: 'portkey', command: process.execPath, args: [script, `--port=${port}`, '--headless'], env, cwd: join(script, '..'), port, healthPath: '/', readyTimeoutMs: 30_000 });
}

/** Headers that make the gateway call the fake upstream (OpenAI-compatible at `upstreamV1`). */
export const portkeyHeaders = (upstreamV1: string): Record<string, string> => ({ 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamV1 });
