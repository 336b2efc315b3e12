// PGlite's one-off jobs, run in a child process so that their memory leaves with it
// (pglite-memory.ts and pglite-template.ts say why):
//   node src/db/pglite-initdb.ts --template [<file>]     initdb, saved as a gzipped cluster (by
//                                                        default where pglite-template.ts looks,
//                                                        and only if missing there: npm's prepare)
//   node src/db/pglite-initdb.ts <dir> [<template>]      a new cluster in <dir>, from the template
//                                                        when given, else by initdb
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { keepWasmBaselineCompiled, PGLITE_START_PARAMS } from './pglite-memory.ts';
import { pgliteTemplatePath, readPgliteTemplate } from './pglite-template.ts';

const [first, second] = process.argv.slice(2);
keepWasmBaselineCompiled();
if (!first) {
  process.stderr.write('usage: node src/db/pglite-initdb.ts --template [<file>] | <PGlite data directory> [<template>]\n');
  process.exitCode = 2;
} else if (first === '--template' && (second !== undefined || !existsSync(pgliteTemplatePath()))) {
  const file = second ?? pgliteTemplatePath();
  const client = await PGlite.create('memory://', { startParams: PGLITE_START_PARAMS });
  const dump = await client.dumpDataDir('gzip');
  await client.close();
  // Written aside and renamed, so a concurrent reader never sees half a template.
  await mkdir(path.dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}-${randomBytes(4).toString('hex')}.partial`;
  await writeFile(partial, Buffer.from(await dump.arrayBuffer()));
  await rename(partial, file).catch(async (err: unknown) => {
    await rm(partial, { force: true });
    throw err;
  });
} else if (first !== '--template') {
  const loadDataDir = second ? await readPgliteTemplate(second) : undefined;
  if (second && !loadDataDir) throw new Error(`no template at ${second}`);
  const client = await PGlite.create(first, { startParams: PGLITE_START_PARAMS, ...(loadDataDir ? { loadDataDir } : {}) });
  await client.close();
}
