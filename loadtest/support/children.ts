import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Child-process launcher for the load tests: starts a server, waits for the JSON log line that
 * announces it is listening (`{"msg":"<readyMsg>","port":N,...}` on stdout), and keeps draining
 * stdout/stderr afterwards so a chatty child (one log line per request) never blocks on a full
 * pipe. Every launched child is tracked and killed when this process exits, however it exits.
 */

export interface LaunchOptions {
  /** Label used in messages. */
  name: string;
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** The `msg` of the JSON stdout line that carries the listening port. */
  readyMsg: string;
  readyTimeoutMs: number;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Launched {
  readonly name: string;
  readonly pid: number;
  readonly port: number;
  /** The parsed ready line (e.g. Troupe's `engine` and `database` fields). */
  readonly readyInfo: Readonly<Record<string, unknown>>;
  /** Bytes the child wrote to stdout since it became ready (its request logs). */
  stdoutBytesSinceReady(): number;
  /** The last few KB of stdout and stderr, for error messages. */
  tail(): string;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
  stop(graceMs?: number): Promise<ExitInfo>;
}

const live = new Set<ChildProcess>();
let handlersInstalled = false;

/** Kills every child still running, synchronously (safe inside an 'exit' handler). */
export function killAllChildren(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
  live.clear();
}

/** Makes sure no child outlives this process: on exit, on Ctrl-C/SIGTERM and on crashes. */
export function installCleanupHandlers(): void {
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

const TAIL_CHARS = 4096;

/** A spawned child with piped stdout/stderr, killed with the others when this process ends. */
export interface Tracked {
  child: ChildProcess & { stdin: NonNullable<ChildProcess['stdin']>; stdout: NonNullable<ChildProcess['stdout']>; stderr: NonNullable<ChildProcess['stderr']> };
  /** Resolves when the child has exited. */
  exited: Promise<ExitInfo>;
  /** How it exited, or null while it runs. */
  exitInfo(): ExitInfo | null;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
  stop(graceMs?: number): Promise<ExitInfo>;
}

/** Spawns with stdout and stderr piped (stdin too with `stdin: 'pipe'`; `child.stdin` is only usable then). */
export function spawnTracked(options: Pick<LaunchOptions, 'command' | 'args' | 'env' | 'cwd'> & { stdin?: 'pipe' | 'ignore' }): Tracked {
  installCleanupHandlers();
  const child = spawn(options.command, [...options.args], {
    cwd: options.cwd,
    env: options.env,
    stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  // A holder, not a `let`: it is set from the 'exit' callback.
  const state: { exit: ExitInfo | null } = { exit: null };
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      state.exit = { code, signal };
      resolve(state.exit);
    });
  });
  return {
    child: child as Tracked['child'],
    exited,
    exitInfo: () => state.exit,
    stop: (graceMs = 10_000) => stopChild(child, exited, () => state.exit, graceMs),
  };
}

/** Keeps the last TAIL_CHARS of what it is given. */
export function tailKeeper(): { remember: (text: string) => void; tail: () => string } {
  let tail = '';
  return {
    remember: (text) => {
      tail = (tail + text).slice(-TAIL_CHARS);
    },
    tail: () => tail,
  };
}

export function launch(options: LaunchOptions): Promise<Launched> {
  const { child, stop } = spawnTracked(options);
  const { remember, tail: tailText } = tailKeeper();

  let ready = false;
  let pending = '';
  let bytesSinceReady = 0;

  return new Promise<Launched>((resolve, reject) => {
    const fail = (message: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${options.name}: ${message}\n--- last output ---\n${tailText()}`));
    };
    const timer = setTimeout(
      () => fail(`no "${options.readyMsg}" line within ${options.readyTimeoutMs} ms`),
      options.readyTimeoutMs,
    );

    child.once('error', (err) => fail(`failed to start ${options.command}: ${err.message}`));
    child.once('exit', (code, signal) => {
      if (!ready) fail(`exited before it was ready (code ${code}, signal ${signal})`);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => remember(text));
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => {
      if (ready) {
        // Hot path while under load: count and keep a short tail, nothing else.
        bytesSinceReady += text.length;
        remember(text);
        return;
      }
      remember(text);
      pending += text;
      let newline: number;
      while (!ready && (newline = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        const info = parseReadyLine(line, options.readyMsg);
        if (!info) continue;
        ready = true;
        pending = '';
        clearTimeout(timer);
        resolve({
          name: options.name,
          pid: child.pid ?? -1,
          port: info.port,
          readyInfo: info.record,
          stdoutBytesSinceReady: () => bytesSinceReady,
          tail: tailText,
          stop,
        });
      }
    });
  });
}

function parseReadyLine(line: string, readyMsg: string): { port: number; record: Record<string, unknown> } | null {
  const trimmed = line.trim();
  if (!trimmed.startsWith('{')) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const record = parsed as Record<string, unknown>;
  if (record.msg !== readyMsg || typeof record.port !== 'number' || !Number.isInteger(record.port)) return null;
  return { port: record.port, record };
}

async function stopChild(
  child: ChildProcess,
  exited: Promise<ExitInfo>,
  current: () => ExitInfo | null,
  graceMs: number,
): Promise<ExitInfo> {
  const already = current();
  if (already) return already;
  child.kill('SIGTERM');
  const graceful = await Promise.race([exited, delay(graceMs).then(() => null)]);
  if (graceful) return graceful;
  child.kill('SIGKILL');
  const killed = await Promise.race([exited, delay(5_000).then(() => null)]);
  if (!killed) throw new Error(`process ${child.pid} did not exit even after SIGKILL`);
  return killed;
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
