// `node src/db/pglite-initdb.ts <dir>`: creates an empty PGlite data directory and exits. The
// server runs it as a child on its first start (src/db/pglite-memory.ts says why).
import { PGlite } from '@electric-sql/pglite';
import { keepWasmBaselineCompiled, PGLITE_START_PARAMS } from './pglite-memory.ts';

const location = process.argv[2];
if (!location) {
  process.stderr.write('usage: node src/db/pglite-initdb.ts <PGlite data directory>\n');
  process.exitCode = 2;
} else {
  keepWasmBaselineCompiled();
  const client = await PGlite.create(location, { startParams: PGLITE_START_PARAMS });
  await client.close();
}
