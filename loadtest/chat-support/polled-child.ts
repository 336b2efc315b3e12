/**
 * Starts Troupe when its stdout will not say where it listens: below LOG_LEVEL=info the
 * `troupe listening` line is not logged, so loadtest/support/children.ts cannot wait for it.
 * Here the port is chosen up front (a free ephemeral port on 127.0.0.1, handed over as PORT)
 * and readiness is polled on GET /healthz. stdout and stderr are drained like children.ts does,
 * and every child is SIGKILLed when this process exits, however it exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import type { ExitInfo, Launched } from '../support/children.ts';
import { delay } from '../support/children.ts';

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

export function killPolledChildren(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
  live.clear();
}

/** A port nobody listens on right now (the usual small race with other processes applies). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface PolledLaunchOptions {
  name: string;
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  port: number;
  readyTimeoutMs: number;
}

const TAIL_CHARS = 4096;

export async function launchPolled(options: PolledLaunchOptions): Promise<Launched> {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', killPolledChildren);
  }
  const child = spawn(options.command, [...options.args], { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let tail = '';
  let bytes = 0;
  // A holder, not a `let`: it is set from the 'exit' callback.
  const state: { exit: ExitInfo | null } = { exit: null };
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      state.exit = { code, signal };
      resolve(state.exit);
    });
  });
  child.once('error', () => {}); // reported through the readiness failure below
  const remember = (text: string) => {
    tail = (tail + text).slice(-TAIL_CHARS);
  };
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    bytes += text.length;
    remember(text);
  });
  child.stderr.on('data', (text: string) => remember(text));

  const url = `http://127.0.0.1:${options.port}/healthz`;
  const deadline = Date.now() + options.readyTimeoutMs;
  let headers: Headers | null = null;
  while (headers === null) {
    if (state.exit !== null) break;
    if (Date.now() > deadline) break;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status === 200) headers = res.headers;
    } catch {
      await delay(100);
    }
  }
  if (headers === null) {
    child.kill('SIGKILL');
    const why = state.exit === null ? `no 200 from ${url} within ${options.readyTimeoutMs} ms` : 'exited before it answered';
    throw new Error(`${options.name}: ${why}\n--- last output ---\n${tail}`);
  }
  const readyBytes = bytes;
  // uWebSockets.js names itself in a response header; node:http does not.
  const engine = headers.has('uwebsockets') ? 'uws' : 'node';
  return {
    name: options.name,
    pid: child.pid ?? -1,
    port: options.port,
    readyInfo: { engine, port: options.port, detectedBy: 'healthz' },
    stdoutBytesSinceReady: () => bytes - readyBytes,
    tail: () => tail,
    stop: async (graceMs = 10_000) => {
      if (state.exit) return state.exit;
      child.kill('SIGTERM');
      const graceful = await Promise.race([exited, delay(graceMs).then(() => null)]);
      if (graceful) return graceful;
      child.kill('SIGKILL');
      const killed = await Promise.race([exited, delay(5_000).then(() => null)]);
      if (!killed) throw new Error(`process ${child.pid} did not exit even after SIGKILL`);
      return killed;
    },
  };
}
