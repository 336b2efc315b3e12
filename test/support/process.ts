import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { trackChild } from './leftovers.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');


export interface TroupeProcess {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the first match of `pattern` in stdout, waiting for output if needed. */
  waitForOutput(pattern: RegExp): Promise<RegExpExecArray>;
  /** Sends SIGTERM (or `signal`) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `node src/main.ts` as a real process (with the same node binary as the tests, so the
 * engine under test is the one that loads) and resolves once it logs that it is listening.
 */
export async function spawnTroupe(env: Record<string, string>): Promise<TroupeProcess> {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /"port":(\d+)[^\n]*"msg":"troupe listening"/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    void exited.then(([code]) => reject(new Error(`troupe exited with ${code} before listening:\n${err}\n${out}`)));
  });
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    stdout: () => out,
    stderr: () => err,
    waitForOutput(pattern) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(out);
          if (!match) return false;
          child.stdout?.off('data', onData);
          resolve(match);
          return true;
        };
        const onData = () => void check();
        if (check()) return;
        child.stdout?.on('data', onData);
        void exited.then(() => check() || reject(new Error(`troupe exited before printing ${pattern}:\n${err}`)));
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      const [code] = await exited;
      return code;
    },
  };
}

/** Runs `node src/main.ts` expecting it to fail at startup; returns its exit code and stderr. */
export async function runTroupeExpectingFailure(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  trackChild(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stderr };
}
