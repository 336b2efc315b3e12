import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
/** A worker that died is started again after this long (not in a tight loop). */
const RESTART_MS = 5_000;

export interface AgentWorkerProcess {
  /** Stops the worker (SIGTERM: it finishes its jobs); resolves once it exited or `graceMs` passed. */
  stop(graceMs: number): Promise<void>;
}

/**
 * `npm start`'s voice agent worker (ROOM_AGENTS=auto): `npm run agent` as a child process with
 * the same environment, told where this server is. Restarted if it dies.
 */
export function startAgentWorker(env: NodeJS.ProcessEnv, troupeUrl: string, logger: Logger): AgentWorkerProcess {
  let child: ChildProcess | null = null;
  let stopping = false;
  let timer: NodeJS.Timeout | null = null;
  const start = () => {
    const proc = spawn(process.execPath, [WORKER], { env: { ...env, AGENT_TROUPE_URL: troupeUrl }, stdio: ['ignore', 'inherit', 'inherit'] });
    child = proc;
    logger.info({ pid: proc.pid }, 'voice agent worker started');
    proc.on('exit', (code, signal) => {
      if (child === proc) child = null;
      if (stopping) return;
      logger.error({ code, signal, restartInMs: RESTART_MS }, 'voice agent worker exited; starting it again');
      timer = setTimeout(start, RESTART_MS);
      timer.unref();
    });
  };
  start();
  return {
    async stop(graceMs) {
      stopping = true;
      if (timer) clearTimeout(timer);
      const proc = child;
      if (!proc || proc.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGTERM');
      const late = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(late);
    },
  };
}
