// An empty PGlite cluster, made once per installed PGlite version and copied for every new store.
// PGlite's initdb runs PostgreSQL's bootstrap in three WebAssembly instances at once: about
// 550 MB for 10-15 s. Loading the saved cluster instead takes one instance, about 270 MB for
// 2-4 s. `npm ci` makes it (the `prepare` script); without it the first store makes it.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const TOOL_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pglite-initdb.ts');
/** initdb takes 3-15 s on a busy 2-core machine. */
const TOOL_TIMEOUT_MS = 180_000;

/**
 * `node_modules/.cache/troupe/pglite-<version>.tar.gz`, beside the PGlite it was made with: a
 * new PGlite version gets a new template, and removing node_modules removes it.
 */
export function pgliteTemplatePath(): string {
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const marker = `${path.sep}node_modules${path.sep}`;
  const at = entry.lastIndexOf(marker);
  if (at === -1) throw new Error(`PGlite is not installed under node_modules (${entry})`);
  const packageDir = entry.slice(0, at + marker.length) + path.join('@electric-sql', 'pglite');
  const { version } = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string };
  return path.join(entry.slice(0, at + marker.length), '.cache', 'troupe', `pglite-${version}.tar.gz`);
}

/** The template as PGlite's loadDataDir takes it; undefined when none was made. */
export async function readPgliteTemplate(file = pgliteTemplatePath()): Promise<Blob | undefined> {
  try {
    return new Blob([await readFile(file)]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The template's path, made first (in a child process, so its peak leaves with it) when missing. */
export async function ensurePgliteTemplate(): Promise<string> {
  const template = pgliteTemplatePath();
  if (!existsSync(template)) await runPgliteTool(['--template', template]);
  return template;
}

/** Runs pglite-initdb.ts with these arguments in a child Node process. */
export function runPgliteTool(args: string[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [TOOL_SCRIPT, ...args], { timeout: TOOL_TIMEOUT_MS, maxBuffer: 4 * 1024 * 1024 }, (error, _stdout, stderr) => {
      if (!error) return resolve();
      reject(new Error(`PGlite could not ${args[0] === '--template' ? 'make its empty-cluster template' : 'create its data directory'} (${error.message.split('\n')[0]}): ${stderr.trim().slice(-2000)}`));
    });
  });
}
