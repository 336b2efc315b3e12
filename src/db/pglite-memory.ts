// PGlite's footprint: it is PostgreSQL compiled to WebAssembly, so its buffers live in a
// WebAssembly memory that never shrinks, and V8 compiles its 9 MB of code in this process.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { PGlite } from '@electric-sql/pglite';
import { ensurePgliteTemplate, runPgliteTool } from './pglite-template.ts';

/**
 * PostgreSQL's default 128 MB of shared buffers end up mostly touched, hence resident for the
 * process's life. One embedded installation's working set fits in 16 MB; the operating
 * system's page cache still holds the files.
 */
export const PGLITE_START_PARAMS: string[] = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];

/**
 * Keeps V8 from recompiling hot WebAssembly functions with its optimizing compiler. For one of
 * PostgreSQL's largest functions (about 100 KB of WebAssembly, #2273 in PGlite 0.5.14) that
 * compilation alone allocates about 600 MB for a second or two, on the first start and on every
 * restart: the start-up peak was 0.8-1.2 GB. Baseline code runs PGlite's queries about half as
 * fast (an insert-and-select loop: 0.3-0.6 ms -> 0.6-1.2 ms per query on a shared 2-core
 * machine; a vector search over 50k chunks 3.5 -> 8.9 ms at p50); PostgreSQL proper is
 * unaffected. V8 reads these flags when a function gets hot, not when a module is compiled, and
 * has none that leaves one function out, so turning them on after start would only move the
 * peak. Process-wide and idempotent: it also applies to WebAssembly in worker threads (OCR,
 * which measured no slower on a small image).
 */
export function keepWasmBaselineCompiled(): void {
  setFlagsFromString('--no-wasm-tier-up');
  setFlagsFromString('--no-wasm-dynamic-tiering');
}

/**
 * Where PGlite keeps `dataDir`'s data (`<dataDir>/pglite`, or `memory://` as is), created if
 * missing. A new store is a copy of the empty-cluster template (pglite-template.ts), made in a
 * child process: PostgreSQL in WebAssembly left about 90 MB of freed native memory in this
 * process that the C allocator never hands back. It is made beside the store and renamed into
 * place, so a start cut short leaves no half-made cluster. The server calls this before loading
 * its other modules, so the two never peak together.
 */
export async function preparePgliteDataDir(dataDir: string): Promise<string> {
  if (dataDir === 'memory://') return dataDir;
  const location = path.resolve(dataDir, 'pglite');
  if (existsSync(path.join(location, 'PG_VERSION'))) return location;
  await mkdir(path.dirname(location), { recursive: true });
  // An empty folder (made by hand, or by an older Troupe) gives way; one holding files does not.
  const present = await readdir(location).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (present && present.length > 0) {
    throw new Error(`${location} holds files but no PostgreSQL cluster (no PG_VERSION): move it away, or point TROUPE_DATA_DIR elsewhere`);
  }
  const fresh = `${location}.new-${randomBytes(4).toString('hex')}`;
  try {
    // Without a template that can be made (a read-only node_modules), initdb makes the store.
    const template = await ensurePgliteTemplate().catch(() => null);
    await runPgliteTool(template ? [fresh, template] : [fresh]);
    if (present) await rmdir(location);
    await rename(fresh, location);
  } finally {
    await rm(fresh, { recursive: true, force: true });
  }
  return location;
}
