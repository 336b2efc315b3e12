/** Child processes (output always drained, every one killed however the benchmark ends) and `runBench` around each benchmark. */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const execFileAsync = promisify(execFile);
export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());
export type Log = (line: string) => void;
export const logger = (name: string): Log => (line) => void process.stderr.write(`[${name}] ${line}\n`);
type ExitInfo = { code: number | null; signal: NodeJS.Signals | null };
/** onSpawn: the pid as soon as the process exists; keepOutput: every line kept for output(). */
type SpawnOptions = {
  name: string; command: string; args: readonly string[]; env: NodeJS.ProcessEnv; cwd: string;
  stdin?: 'pipe' | 'ignore'; onSpawn?: (pid: number) => void; keepOutput?: boolean; onLine?: (line: string) => void;
};
type Piped = ChildProcess & { [K in 'stdin' | 'stdout' | 'stderr']: NonNullable<ChildProcess[K]> };
/** tail(): the last 4 KB of stdout and stderr; stop(): SIGTERM (or `signal`), SIGKILL after `graceMs`. */
export type Tracked = ReturnType<typeof spawnTracked>;
/** A child that answers: its port and its parsed ready line (`{engine, ...}` for Troupe). */
export type Launched = Tracked & { readonly port: number; readonly readyInfo: Readonly<Record<string, unknown>> };
/** What a process needs to run at all: everything else a child gets is the benchmark's, never the developer's shell. */
export function childEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[name] !== undefined) env[name] = process.env[name];
  return Object.assign(env, settings);
}
const live = new Set<ChildProcess>();
function killAllChildren(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
}
function installCleanupHandlers(): void {
  if (process.listeners('exit').includes(killAllChildren)) return;
  process.on('exit', killAllChildren);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      // process.exit runs the 'exit' handler, which kills them.
      process.stderr.write(`\nreceived ${signal}: killing ${live.size} child process(es)\n`);
      process.exit(130);
    });
  }
}
export function spawnTracked(options: SpawnOptions) {
  installCleanupHandlers();
  const stdio: ('pipe' | 'ignore')[] = [options.stdin ?? 'ignore', 'pipe', 'pipe'];
  const child = spawn(options.command, [...options.args], { cwd: options.cwd, env: options.env, stdio }) as Piped;
  live.add(child);
  options.onSpawn?.(child.pid ?? -1);
  const state = { exit: null as ExitInfo | null, tail: '', all: '', pending: '' };
  const remember = (text: string) => {
    state.tail = (state.tail + text).slice(-4096);
    if (options.keepOutput) state.all += text;
  };
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, signal) => (live.delete(child), resolve((state.exit = { code, signal }))));
  });
  child.once('error', (err) => remember(`\nspawn failed: ${err.message}\n`));
  child.stderr.setEncoding('utf8').on('data', remember);
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    remember(text);
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
  const [tail, output, exitInfo] = [() => state.tail, () => state.all, (): ExitInfo | null => state.exit];
  return { name: options.name, child, pid: child.pid ?? -1, exited, exitInfo, tail, output, stop };
}
/** `read()`, or null when it throws (a file that is gone, text that is not JSON). */
export function attempt<T>(read: () => T): T | null {
  try {
    return read();
  } catch {
    return null;
  }
}
export const parseJson = (line: string): Record<string, unknown> | null => {
  const value = attempt<unknown>(() => JSON.parse(line));
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
};
type LaunchOptions = SpawnOptions & { readyTimeoutMs?: number } & ({ readyMsg: string } | { port: number; healthPath?: string });
/** Ready on the JSON stdout line `{"msg":<readyMsg>,"port":N,...}`; or, for a child that does not log its port (Troupe below
 * LOG_LEVEL=info, Portkey), on a 200 from `healthPath` (/healthz) on `port`, chosen first. */
export async function launch(options: LaunchOptions): Promise<Launched> {
  const timeoutMs = options.readyTimeoutMs ?? 30_000;
  const msg = 'readyMsg' in options ? options.readyMsg : null;
  const ready = Promise.withResolvers<Record<string, unknown>>();
  const onLine = (line: string) => {
    const info = msg !== null && line.includes(msg) ? parseJson(line) : null;
    if (info?.msg === msg && typeof info.port === 'number') ready.resolve(info);
  };
  const tracked = spawnTracked({ ...options, onLine: msg === null ? undefined : onLine });
  const timer = setTimeout(() => ready.reject(new Error(`not ready within ${timeoutMs} ms`)), timeoutMs);
  void tracked.exited.then((e) => ready.reject(new Error(`exited before it was ready (code ${e.code}, signal ${e.signal})`)));
  let waiting = true;
  const poll = async (port: number, url: string) => {
    for (; waiting; await delay(100)) {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) }).catch(() => null);
      await res?.arrayBuffer();
      // uWebSockets.js names itself in a response header; node:http does not.
      if (res?.status === 200) return ready.resolve({ engine: res.headers.has('uwebsockets') ? 'uws' : 'node', port });
    }
  };
  if (!('readyMsg' in options)) void poll(options.port, `http://127.0.0.1:${options.port}${options.healthPath ?? '/healthz'}`);
  try {
    const info = await ready.promise;
    return { ...tracked, port: info.port as number, readyInfo: info };
  } catch (err) {
    tracked.child.kill('SIGKILL');
    throw new Error(`${tracked.name}: ${(err as Error).message}\n--- last output ---\n${tracked.tail()}`);
  } finally {
    waiting = false;
    clearTimeout(timer);
  }
}
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
export type Run = { started: number; stamp: string; log: Log };
/** Runs `main` on Node >= 24; after `budgetMs` kills every child and exits with 2; on failure exits with 1 and the stack. */
export function runBench(name: string, budgetMs: number, main: (run: Run) => Promise<void>): void {
  const log = logger(name);
  if (Number(process.versions.node.split('.')[0]) < 24) throw new Error(`run with Node >= 24 (npm run ${name}), not ${process.version}`);
  installCleanupHandlers();
  const deadline = setTimeout(() => {
    log(`overall time budget of ${Math.round(budgetMs / 1000)} s exceeded: killing children`);
    process.exit(2);
  }, budgetMs).unref();
  const run = { started: Date.now(), stamp: new Date().toISOString().replace(/[:.]/g, '-'), log };
  main(run).then(
    () => (clearTimeout(deadline), process.exit(process.exitCode ?? 0)),
    (err: unknown) => {
      log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exit(1);
    },
  );
}
/** Which Troupe was measured: HEAD and the files of src/ that differ from it (others edit it too). */
export async function gitState(): Promise<{ head: string; dirtySrc: string[] }> {
  const git = (args: string[]) => execFileAsync('git', args, { cwd: ROOT, timeout: 10_000 }).then((r) => r.stdout, () => '');
  const [head, status] = await Promise.all([git(['rev-parse', '--short', 'HEAD']), git(['status', '--porcelain', '--', 'src'])]);
  return { head: head.trim() || 'unknown', dirtySrc: status.split('\n').map((l) => l.slice(3).trim()).filter(Boolean) };
}
export const machine = (): { node: string; cpus: number; cpuModel: string } =>
  ({ node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown' });
