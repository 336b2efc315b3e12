import { execFile } from 'node:child_process';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export type UwsNode = { path: string; source: string } | { path: null; reason: string };

/**
 * Finds a Node binary that can load uWebSockets.js: $UWS_NODE if set, else the last stdout line
 * of `bash .ci/uws-node.sh` (which may build and cache a glibc-patched copy on first use).
 * Either way the binary must actually load uWS, or the uws targets are skipped with the reason.
 */
export async function resolveUwsNode(root: string, scriptTimeoutMs: number): Promise<UwsNode> {
  let candidate: string;
  let source: string;
  const fromEnv = process.env.UWS_NODE?.trim();
  if (fromEnv) {
    candidate = fromEnv;
    source = 'UWS_NODE';
  } else {
    const script = join(root, '.ci', 'uws-node.sh');
    try {
      await access(script);
    } catch {
      return { path: null, reason: 'UWS_NODE is not set and .ci/uws-node.sh does not exist' };
    }
    try {
      const { stdout } = await run('bash', [script], { cwd: root, timeout: scriptTimeoutMs, maxBuffer: 1 << 20 });
      const last = stdout.trim().split('\n').at(-1)?.trim() ?? '';
      if (!last) return { path: null, reason: '.ci/uws-node.sh printed no path' };
      candidate = last;
      source = '.ci/uws-node.sh';
    } catch (err) {
      const e = err as Error & { stderr?: string; killed?: boolean };
      const why = e.killed ? `timed out after ${scriptTimeoutMs} ms` : (e.stderr?.trim().split('\n').at(-1) ?? e.message);
      return { path: null, reason: `.ci/uws-node.sh failed: ${why}` };
    }
  }
  try {
    await run(candidate, ['--input-type=commonjs', '-e', 'require("uWebSockets.js")'], { cwd: root, timeout: 30_000 });
  } catch (err) {
    const e = err as Error & { stderr?: string };
    // Node prints the thrown error and its cause as "Error: ..." lines; the last one is the root
    // cause (typically "version `GLIBC_2.38' not found").
    const errorLines = (e.stderr ?? '').split('\n').filter((l) => /^\w*Error: /.test(l));
    const why = (errorLines.at(-1) ?? e.message.split('\n')[0] ?? 'unknown error').slice(0, 300);
    return { path: null, reason: `${candidate} (from ${source}) cannot load uWebSockets.js: ${why}` };
  }
  return { path: candidate, source };
}
