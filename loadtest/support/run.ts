/** What every benchmark's main() does around its measurements. */
import { execFile } from 'node:child_process';
import { cpus } from 'node:os';
import { promisify } from 'node:util';
import { installCleanupHandlers, killAllChildren } from './children.ts';
import { resolveUwsNode } from './uws-node.ts';

const execFileAsync = promisify(execFile);

/**
 * Checks the Node version, makes sure no child outlives this process, and arms a last-resort
 * timer (`budgetMs`) that kills every child and exits with code 2. Returns the start time, the
 * run's file-name stamp, and `disarm` for the timer.
 */
export function startRun(name: string, budgetMs: number): { started: number; stamp: string; disarm: () => void } {
  if (Number(process.versions.node.split('.')[0]) < 24) throw new Error(`run with Node >= 24 (npm run ${name}), not ${process.version}`);
  installCleanupHandlers();
  const deadline = setTimeout(() => {
    process.stderr.write(`\n[${name}] overall time budget of ${Math.round(budgetMs / 1000)} s exceeded: killing children\n`);
    killAllChildren();
    process.exit(2);
  }, budgetMs);
  deadline.unref();
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

const UWS_SCRIPT_TIMEOUT_MS = 10 * 60_000;

/** A Node binary that can load uWebSockets.js when `wanted` (path null: none, see `note`). */
export async function uwsEngineNode(root: string, wanted: boolean, log: (line: string) => void): Promise<{ path: string | null; note: string }> {
  if (!wanted) return { path: null, note: 'not requested' };
  const uws = await resolveUwsNode(root, UWS_SCRIPT_TIMEOUT_MS);
  const note = 'reason' in uws ? uws.reason : `${uws.path} (from ${uws.source})`;
  log(uws.path !== null ? `uWS-capable node: ${note}` : `no uWS-capable node, uws skipped: ${note}`);
  return { path: uws.path, note };
}
