/**
 * Portkey's open-source AI gateway (Node/Hono) as the peer to compare with: installed on first
 * use into a cache folder with `npm install --prefix` (never a project dependency), started as a
 * child on a port of its own with `--headless`, and pointed at the fake upstream per request by
 * headers (`x-portkey-provider: openai`, `x-portkey-custom-host`).
 */
import { execFile } from 'node:child_process';
import { access } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Launched } from './children.ts';
import { freePort, launchPolled } from './polled-child.ts';
import { troupeEnv } from './troupe-env.ts';

const PORTKEY_VERSION = '1.15.2';
const run = promisify(execFile);

function portkeyDir(): string {
  const cache = process.env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache');
  return join(cache, 'troupe-bench', `portkey-${PORTKEY_VERSION}`);
}

/** The gateway's start script, installing it first when the cache folder lacks it. */
export async function installPortkey(log: (line: string) => void): Promise<string> {
  const dir = portkeyDir();
  const script = join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  try {
    await access(script);
    return script;
  } catch {
    log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into ${dir}`);
  }
  await run('npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', `@portkey-ai/gateway@${PORTKEY_VERSION}`], { timeout: 300_000, maxBuffer: 1 << 24 });
  await access(script);
  return script;
}

export async function startPortkey(script: string): Promise<Launched> {
  const port = await freePort();
  return launchPolled({
    name: 'portkey',
    command: process.execPath,
    args: [script, `--port=${port}`, '--headless'],
    env: troupeEnv({ NODE_ENV: 'production' }),
    cwd: join(script, '..'),
    port,
    healthPath: '/',
    readyTimeoutMs: 30_000,
  });
}

/** Headers that make the gateway call the fake upstream (OpenAI-compatible at `upstreamV1`). */
export function portkeyHeaders(upstreamV1: string): Record<string, string> {
  return { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamV1 };
}
