/**
 * Starts a server whose stdout will not say where it listens (Troupe below LOG_LEVEL=info does not
 * log `troupe listening`; Portkey's gateway prints no port), so children.ts cannot wait for it.
 * Here the port is chosen up front (a free ephemeral port on 127.0.0.1, handed over as PORT)
 * and readiness is polled on GET /healthz. The child is spawned and tracked by children.ts (so
 * it is killed with the others, however this process exits), and its output is drained.
 */
import { createServer, type AddressInfo } from 'node:net';
import { delay, spawnTracked, tailKeeper, type Launched } from './children.ts';

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
  /** Answers 200 once the child is ready (default /healthz). */
  healthPath?: string;
}

export async function launchPolled(options: PolledLaunchOptions): Promise<Launched> {
  const { child, exitInfo, stop } = spawnTracked(options);
  const { remember, tail } = tailKeeper();
  let bytes = 0;
  child.once('error', () => {}); // reported through the readiness failure below
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    bytes += text.length;
    remember(text);
  });
  child.stderr.on('data', (text: string) => remember(text));

  const url = `http://127.0.0.1:${options.port}${options.healthPath ?? '/healthz'}`;
  const deadline = Date.now() + options.readyTimeoutMs;
  let headers: Headers | null = null;
  while (headers === null) {
    if (exitInfo() !== null) break;
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
    const why = exitInfo() === null ? `no 200 from ${url} within ${options.readyTimeoutMs} ms` : 'exited before it answered';
    throw new Error(`${options.name}: ${why}\n--- last output ---\n${tail()}`);
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
    tail,
    stop,
  };
}
