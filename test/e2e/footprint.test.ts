// What keeps Troupe small at rest: nothing for documents or voice loads in the server at start,
// PGlite runs with small shared buffers, and start-up garbage is handed back before serving.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
import { sql } from 'drizzle-orm';
import { describe, expect, it, onTestFinished } from 'vitest';
import { openDatabase } from '../../src/db/database.ts';
import { pgliteTemplatePath, runPgliteTool } from '../../src/db/pglite-template.ts';
import { releaseStartupMemory } from '../../src/observability/startup-memory.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { BACKENDS } from '../support/env.ts';
import { trackChild } from '../support/leftovers.ts';
import { createStorage } from '../support/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Loaded by the parser worker (or the voice worker) when needed, never by the server at start. */
const NOT_AT_START = ['pdf-parse', 'pdfjs-dist', 'mammoth', 'htmlparser2', 'tesseract.js', 'tesseract.js-core', '@tesseract.js-data', 'jszip', '@livekit/agents', '@livekit/rtc-node'];
/** Appends every module the process resolves to the file named by MODULE_LOG. */
const MODULE_HOOK = `data:text/javascript,${encodeURIComponent(
  "import{registerHooks}from'node:module';import{appendFileSync}from'node:fs';registerHooks({resolve(s,c,n){const r=n(s,c);appendFileSync(process.env.MODULE_LOG,r.url+'\\n');return r}});",
)}`;

/** Runs `node src/main.ts` with the module hook until it listens; returns the packages it resolved. */
async function packagesAtStart(env: Record<string, string>): Promise<Set<string>> {
  const dir = await mkdtemp(path.join(tmpdir(), 'troupe-modules-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const log = path.join(dir, 'modules.log');
  const child = spawn(process.execPath, ['--import', MODULE_HOOK, 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', MODULE_LOG: log, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  const exited = once(child, 'exit');
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('"msg":"troupe listening"')) resolve();
    });
    void exited.then(() => reject(new Error(`troupe exited before listening:\n${out}`)));
  });
  child.kill('SIGTERM');
  await exited;
  const packages = new Set<string>();
  for (const url of (await readFile(log, 'utf8')).split('\n')) {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (match?.[1]) packages.add(match[1]);
  }
  return packages;
}

describe.each(BACKENDS)('footprint at start on $kind', (backend) => {
  it('loads no document parser, OCR data or voice agent in the server process', async () => {
    const storage = await createStorage(backend);
    onTestFinished(() => storage.dispose());
    const packages = await packagesAtStart(storage.env);
    // The hook saw the server's own dependencies, so an empty list below means something.
    expect(packages).toContain('drizzle-orm');
    expect(NOT_AT_START.filter((name) => packages.has(name))).toEqual([]);
  });
});

describe('PGlite', () => {
  it('creates a new data directory in a child process, then runs with 16 MB of shared buffers', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'troupe-pglite-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const database = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
    onTestFinished(() => database.close());
    expect(existsSync(path.join(dir, 'pglite', 'PG_VERSION'))).toBe(true);
    const result = await database.db.execute(sql`select current_setting('shared_buffers') as shared_buffers`);
    expect(rowsOf<{ shared_buffers: string }>(result)[0]?.shared_buffers).toBe('16MB');
    // Made from the empty-cluster template, which is kept for the next new store.
    expect(existsSync(pgliteTemplatePath())).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(['pglite']);
  });

  it('keeps what a store made from the template holds across a restart', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'troupe-pglite-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const first = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
    await first.db.execute(sql`create table kept (note text)`);
    await first.db.execute(sql`insert into kept values ('still here')`);
    await first.close();
    const again = await openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 });
    onTestFinished(() => again.close());
    expect(rowsOf<{ note: string }>(await again.db.execute(sql`select note from kept`))).toEqual([{ note: 'still here' }]);
  });

  it('refuses a store folder that holds files but no cluster, and leaves it as it was', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'troupe-pglite-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    await mkdir(path.join(dir, 'pglite'));
    await writeFile(path.join(dir, 'pglite', 'notes.txt'), 'mine');
    await expect(openDatabase({ databaseUrl: undefined, dataDir: dir, poolSize: 1 })).rejects.toThrow(/holds files but no PostgreSQL cluster/);
    expect(await readdir(path.join(dir, 'pglite'))).toEqual(['notes.txt']);
    expect((await readdir(dir)).sort()).toEqual(['pglite']);
  });

  it('makes a template with initdb when asked, and a store from it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'troupe-pglite-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const template = path.join(dir, 'template.tar.gz');
    await runPgliteTool(['--template', template]);
    await runPgliteTool([path.join(dir, 'store'), template]);
    expect(existsSync(path.join(dir, 'store', 'PG_VERSION'))).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(['store', 'template.tar.gz']);
  });
});

describe('releaseStartupMemory', () => {
  it('collects, then leaves gc() unexposed to contexts made afterwards', () => {
    const ms = releaseStartupMemory();
    expect(ms).toBeTypeOf('number');
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
