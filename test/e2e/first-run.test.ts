import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { BACKENDS, HTTP_ENGINE } from '../support/env.ts';
import { runTroupeExpectingFailure, spawnTroupe } from '../support/process.ts';
import { trackChild } from '../support/leftovers.ts';
import { createStorage } from '../support/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const backend = BACKENDS.at(-1) ?? BACKENDS[0]!;

/** True while a process with this pid exists (signal 0 only checks). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe(`the first run on ${backend.kind}`, () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('npm start stops, server included, on %s sent to the npm process itself', async (signal) => {
    const storage = await createStorage(backend);
    onTestFinished(() => storage.dispose());
    // The real `npm start`, as a user runs it (npm on PATH, as `npm test` was run). npm puts
    // the project's own node first on PATH, so the engine is the one it can load (`auto`).
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, ...storage.env, HTTP_ENGINE: 'auto', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(npm);
    const exited = once(npm, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    let serverPid = 0;
    onTestFinished(() => {
      if (npm.exitCode === null) npm.kill('SIGKILL');
      if (serverPid && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
    });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      npm.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('"msg":"troupe listening"')) resolve();
      });
      void exited.then(() => reject(new Error(`npm start exited before listening:\n${out}`)));
    });
    // npm's child is the server itself (`exec`), not a shell that would not pass the signal on.
    serverPid = Number(execFileSync('ps', ['-o', 'pid=', '--ppid', String(npm.pid)]).toString().trim().split('\n')[0]);
    expect(execFileSync('ps', ['-o', 'args=', '-p', String(serverPid)]).toString()).toContain('src/main.ts');
    npm.kill(signal);
    await exited;
    expect(out).toContain('"msg":"troupe stopped"');
    // The server is gone too; npm reaps it before exiting, so no wait is needed.
    expect(alive(serverPid)).toBe(false);
  });

  it('creates no first key in a start that fails, so the next start shows one', async () => {
    const storage = await createStorage(backend);
    onTestFinished(() => storage.dispose());
    const busy = createServer();
    busy.listen(0); // every interface, so no engine can bind the port beside it
    await once(busy, 'listening');
    onTestFinished(() => void busy.close());
    const port = String((busy.address() as AddressInfo).port);
    const failed = await runTroupeExpectingFailure({ ...storage.env, HTTP_ENGINE, PORT: port, HOST: '127.0.0.1' });
    expect(failed.code).not.toBe(0);

    const troupe = await spawnTroupe({ ...storage.env, HTTP_ENGINE, LOG_LEVEL: 'info' });
    onTestFinished(async () => void (await troupe.stop()));
    const key = /sk-troupe-[A-Za-z0-9_-]+/.exec(troupe.stdout())?.[0];
    expect(key, troupe.stdout()).toBeDefined();
    const res = await fetch(`${troupe.url}/characters`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
  });
});
