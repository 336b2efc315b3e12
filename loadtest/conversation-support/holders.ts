/**
 * The benchmark's side of socket-holder.ts: starts holder processes (with `ulimit -n` raised),
 * sends them commands and waits for the answers. They are spawned through support/children.ts,
 * which kills them when this process exits.
 */
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { spawnTracked, tailKeeper } from '../support/children.ts';
import { troupeEnv } from '../support/troupe-env.ts';
import { withFileLimit } from './proc.ts';

const HERE = dirname(fileURLToPath(import.meta.url));

export interface HolderStats {
  op: 'stats';
  open: number;
  unexpectedCloses: number;
  closeCodes: Record<string, number>;
  messages: number;
  doneChunks: number;
  rss: number;
  heapUsed: number;
  external: number;
  fdLimit: number | null;
  gc: boolean;
}

export interface ConnectResult {
  op: 'connect';
  ok: number;
  failed: number;
  errors: Record<string, number>;
  samples: Record<string, string>;
  ms: number;
  open: number;
}

export interface Holder {
  readonly pid: number;
  readonly fdLimit: number | null;
  readonly localAddress: string;
  /** Sends a command and resolves with the next answer (commands run one at a time). */
  command<T>(cmd: Record<string, unknown>, timeoutMs: number): Promise<T>;
  stop(): Promise<void>;
}

export async function startHolder(name: string, fdLimit: number, localAddress: string, cwd: string): Promise<Holder> {
  const { command, args } = withFileLimit(fdLimit, process.execPath, ['--expose-gc', join(HERE, 'socket-holder.ts')]);
  const { child, exited } = spawnTracked({ command, args, cwd, env: troupeEnv({}), stdin: 'pipe' });
  const { remember, tail } = tailKeeper();
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', remember);
  let gone = false;
  void exited.then(() => {
    gone = true;
    for (const waiter of waiters.splice(0)) waiter.reject(new Error(`${name} exited; stderr: ${tail().slice(-500)}`));
  });
  const waiters: { op: string; resolve: (value: unknown) => void; reject: (err: Error) => void }[] = [];
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    let answer: unknown;
    try {
      answer = JSON.parse(line);
    } catch {
      return; // not ours (a warning printed by Node)
    }
    const op = (answer as { op?: unknown } | null)?.op;
    const waiter = waiters[0];
    if (!waiter) return;
    if (op === 'error') {
      waiters.shift();
      waiter.reject(new Error(`${name}: ${String((answer as { message?: unknown }).message)}`));
    } else if (op === waiter.op) {
      waiters.shift();
      waiter.resolve(answer);
    }
    // Anything else answers a command whose wait timed out: dropped.
  });
  child.stdin.on('error', () => {
    // The child died; the exit handler reports it.
  });

  const next = <T>(timeoutMs: number, what: string): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (gone) {
        reject(new Error(`${name} is not running; stderr: ${tail().slice(-500)}`));
        return;
      }
      const timer = setTimeout(() => {
        const i = waiters.indexOf(waiter);
        if (i !== -1) waiters.splice(i, 1);
        reject(new Error(`${name}: no answer to ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = {
        op: what,
        resolve: (value: unknown) => {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      waiters.push(waiter);
    });

  const hello = await next<{ op: string; pid: number; fdLimit: number | null }>(30_000, 'hello');
  return {
    pid: hello.pid,
    fdLimit: hello.fdLimit,
    localAddress,
    command<T>(cmd: Record<string, unknown>, timeoutMs: number): Promise<T> {
      const answer = next<T>(timeoutMs, String(cmd.op));
      child.stdin.write(`${JSON.stringify(cmd)}\n`);
      return answer;
    },
    async stop() {
      if (gone) return;
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
