/**
 * Child processes of a benchmark: spawned with piped output that is always drained (a chatty
 * child never blocks on a full pipe), waited for on their ready line or by polling a health path,
 * and killed however this process ends. Also what every main() does around its measurements.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { promisify } from 'node:util';

export const execFileAsync = promisify(execFile);
export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdin?: 'pipe' | 'ignore';
  /** Called with the pid as soon as the process exists (bench:memory samples start-up). */
  onSpawn?: (pid: number) => void;
}

export interface Tracked {
  readonly name: string;
  child: ChildProcess & { stdin: NonNullable<ChildProcess['stdin']>; stdout: NonNullable<ChildProcess['stdout']>; stderr: NonNullable<ChildProcess['stderr']> };
  readonly pid: number;
  exited: Promise<ExitInfo>;
  exitInfo(): ExitInfo | null;
  /** The last 4 KB of stdout and stderr. */
  tail(): string;
  /** Every stdout line, with `keepOutput` (a scenario that reads logs afterwards). */
  output(): string;
  /** SIGTERM (or `signal`), SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number, signal?: NodeJS.Signals): Promise<ExitInfo>;
}

/** A child that answers: its port and the parsed ready line (`{engine, database, ...}` for Troupe). */
export interface Launched extends Tracked {
  readonly port: number;
  readonly readyInfo: Readonly<Record<string, unknown>>;
}

const live = new Set<ChildProcess>();
let handlersInstalled = false;

export function killAllChildren(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
}

function installCleanupHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', killAllChildren);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      process.stderr.write(`\nreceived ${signal}: killing ${live.size} child process(es)\n`);
      killAllChildren();
      process.exit(130);
    });
  }
}

export function spawnTracked(options: SpawnOptions & { keepOutput?: boolean; onLine?: (line: string) => void }): Tracked {
  installCleanupHandlers();
  const child = spawn(options.command, [...options.args], { cwd: options.cwd, env: options.env, stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'] }) as Tracked['child'];
  live.add(child);
  options.onSpawn?.(child.pid ?? -1);
  const state: { exit: ExitInfo | null; tail: string; all: string; pending: string } = { exit: null, tail: '', all: '', pending: '' };
  const remember = (text: string) => void (state.tail = (state.tail + text).slice(-4096));
  const exited = new Promise<ExitInfo>((resolve) => child.once('exit', (code, signal) => (live.delete(child), resolve((state.exit = { code, signal })))));
  child.once('error', (err) => remember(`\nspawn failed: ${err.message}\n`));
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    remember(text);
    if (options.keepOutput) state.all += text;
  });
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    remember(text);
    if (options.keepOutput) state.all += text;
    if (!options.onLine) return;
    const lines = (state.pending + text).split('\n');
    state.pending = lines.pop() ?? '';
    for (const line of lines) options.onLine(line);
  });
  const stop = async (graceMs = 10_000, signal: NodeJS.Signals = 'SIGTERM'): Promise<ExitInfo> => {
    if (state.exit) return state.exit;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    return exited.finally(() => clearTimeout(timer));
  };
  return { name: options.name, child, pid: child.pid ?? -1, exited, exitInfo: () => state.exit, tail: () => state.tail, output: () => state.all, stop };
}

/** Waits for the JSON stdout line `{"msg":<readyMsg>,"port":N,...}`. */
export function launch(options: SpawnOptions & { readyMsg: string; readyTimeoutMs: number; keepOutput?: boolean }): Promise<Launched> {
  return new Promise<Launched>((resolve, reject) => {
    let ready = false;
    const onLine = (line: string) => {
      if (ready || !line.includes(options.readyMsg)) return;
      const info = parseJson(line);
      if (info?.msg !== options.readyMsg || typeof info.port !== 'number') return;
      ready = true;
      clearTimeout(timer);
      resolve({ ...tracked, port: info.port, readyInfo: info });
    };
    const tracked = spawnTracked({ ...options, onLine });
    const fail = (why: string) => {
      if (ready) return;
      ready = true;
      tracked.child.kill('SIGKILL');
      reject(new Error(`${options.name}: ${why}\n--- last output ---\n${tracked.tail()}`));
    };
    const timer = setTimeout(() => fail(`no "${options.readyMsg}" line within ${options.readyTimeoutMs} ms`), options.readyTimeoutMs);
    void tracked.exited.then((e) => fail(`exited before it was ready (code ${e.code}, signal ${e.signal})`));
  });
}

/** For a child that does not log its port (Troupe below LOG_LEVEL=info, Portkey): the port is chosen first, `healthPath` polled. */
export async function launchPolled(options: SpawnOptions & { port: number; readyTimeoutMs: number; healthPath?: string }): Promise<Launched> {
  const tracked = spawnTracked(options);
  const url = `http://127.0.0.1:${options.port}${options.healthPath ?? '/healthz'}`;
  const deadline = Date.now() + options.readyTimeoutMs;
  while (tracked.exitInfo() === null && Date.now() < deadline) {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) }).catch(() => null);
    await res?.arrayBuffer();
    // uWebSockets.js names itself in a response header; node:http does not.
    if (res?.status === 200) return { ...tracked, port: options.port, readyInfo: { engine: res.headers.has('uwebsockets') ? 'uws' : 'node', port: options.port } };
    await delay(100);
  }
  tracked.child.kill('SIGKILL');
  throw new Error(`${options.name}: ${tracked.exitInfo() ? 'exited before it answered' : `no 200 from ${url}`}\n--- last output ---\n${tracked.tail()}`);
}

export function parseJson(line: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** A port nobody listens on right now (the usual small race with other processes applies). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `command args...` with `ulimit -n` raised first (else the hard limit); `exec` keeps the pid. */
export function withFileLimit(limit: number, command: string, args: readonly string[]): { command: string; args: string[] } {
  const script = `ulimit -n ${Math.floor(limit)} 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$0" "$@"`;
  return { command: 'bash', args: ['-c', script, command, ...args] };
}

/**
 * Checks the Node version, makes sure no child outlives this process, and arms a last-resort
 * timer that kills every child and exits with code 2. Gives the run's file-name stamp.
 */
export function startRun(name: string, budgetMs: number): { started: number; stamp: string; disarm: () => void } {
  if (Number(process.versions.node.split('.')[0]) < 24) throw new Error(`run with Node >= 24 (npm run ${name}), not ${process.version}`);
  installCleanupHandlers();
  const deadline = setTimeout(() => {
    process.stderr.write(`\n[${name}] overall time budget of ${Math.round(budgetMs / 1000)} s exceeded: killing children\n`);
    killAllChildren();
    process.exit(2);
  }, budgetMs).unref();
  return { started: Date.now(), stamp: new Date().toISOString().replace(/[:.]/g, '-'), disarm: () => clearTimeout(deadline) };
}

/** Which Troupe was measured: HEAD and the files of src/ that differ from it (others edit it too). */
export async function gitState(root: string): Promise<{ head: string; dirtySrc: string[] }> {
  const git = (args: string[]) => execFileAsync('git', args, { cwd: root, timeout: 10_000 }).then((r) => r.stdout, () => '');
  const head = (await git(['rev-parse', '--short', 'HEAD'])).trim() || 'unknown';
  const status = await git(['status', '--porcelain', '--', 'src']);
  return { head, dirtySrc: status.split('\n').map((l) => l.slice(3).trim()).filter(Boolean) };
}

export function machine(): { node: string; cpus: number; cpuModel: string } {
  const list = cpus();
  return { node: process.version, cpus: list.length, cpuModel: list[0]?.model ?? 'unknown' };
}
