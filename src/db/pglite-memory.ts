// PGlite's footprint: it is PostgreSQL compiled to WebAssembly, so its buffers live in a
// WebAssembly memory that never shrinks, and V8 compiles its 9 MB of code in this process.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { PGlite } from '@electric-sql/pglite';

const INITDB_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pglite-initdb.ts');
/** initdb takes 3-10 s on a busy 2-core machine. */
const INITDB_TIMEOUT_MS = 120_000;

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
 * machine); PostgreSQL proper is unaffected. Process-wide and idempotent: it also applies to
 * WebAssembly in worker threads (OCR, which measured no slower on a small image).
 */
export function keepWasmBaselineCompiled(): void {
  setFlagsFromString('--no-wasm-tier-up');
  setFlagsFromString('--no-wasm-dynamic-tiering');
}

/**
 * Where PGlite keeps `dataDir`'s data (`<dataDir>/pglite`, or `memory://` as is), created if
 * missing. An empty directory gets initdb in a child process: initdb runs PostgreSQL three times
 * over in WebAssembly, and in this process it left about 90 MB of freed native memory that the C
 * allocator never hands back (idle RSS after a first start was about 290 MB against 200 MB after
 * a restart). The server calls this before loading its other modules, so the two never peak
 * together.
 */
export async function preparePgliteDataDir(dataDir: string): Promise<string> {
  if (dataDir === 'memory://') return dataDir;
  const location = path.resolve(dataDir, 'pglite');
  await mkdir(location, { recursive: true });
  if (existsSync(path.join(location, 'PG_VERSION'))) return location;
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [INITDB_SCRIPT, location], { timeout: INITDB_TIMEOUT_MS, maxBuffer: 4 * 1024 * 1024 }, (error, _stdout, stderr) => {
      if (!error) return resolve();
      reject(new Error(`PGlite could not create its data directory in ${location} (${error.message.split('\n')[0]}): ${stderr.trim().slice(-2000)}`));
    });
  });
  return location;
}
