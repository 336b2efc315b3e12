// postgres.js 3.4.9 loses track of a connection whose socket closes while a write is buffered
// (porsager/postgres#1066, #1154 and #1208 report it; none is fixed in a release), loses a
// failed COPY, and leaves Nagle's algorithm on:
//  1. closed() and terminate() cancel the buffered write's setImmediate but keep its handle and
//     its bytes, and only a write that runs resets them. The connection then never schedules a
//     write again: its next start-up message sits unsent until connect_timeout, and again on
//     every retry, so the pool loses that slot after an outage (our outage test's stray 503s).
//  2. A query that reaches a connection between its socket's 'error' and 'close' events is
//     never settled: closed() rejects pending queries only when the close had no error.
//  3. A write scheduled after the close (a transaction's next statement) meets a null socket
//     and throws from a timer, which ends the process.
//  4. A `COPY ... FROM STDIN` that the server rejects after its last row was sent (a key
//     violation found at the end) never settles its writable: the error is dropped and whoever
//     waits for the copy waits forever (porsager/postgres#1173, open; PR #1183 makes this edit).
//  5. The driver leaves Nagle's algorithm on. A small write behind a large one then waits for the
//     server's delayed ACK: each 1 MiB COPY of a document part waited about 40 ms for its
//     CopyDone. libpq and node-postgres set TCP_NODELAY.
// `npm ci` applies the edits below to each of the driver's builds (the `prepare` script), and
// the PostgreSQL backend refuses to start on a driver without them. An edit whose original text
// is gone means the driver changed: the script fails, so an upgrade is checked against this list.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface DriverEdit {
  readonly name: string;
  readonly from: string;
  readonly to: string;
}

const MARK = '/* troupe: src/db/postgres-driver-patch.ts */';

export const DRIVER_EDITS: readonly DriverEdit[] = [
  {
    name: 'a write with no socket fails its queries instead of throwing',
    from: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n',
    to:
      '  function nextWrite(fn) {\n' +
      `    if (socket === null) { ${MARK}\n` +
      '      chunk = nextWriteTimer = null\n' +
      "      const err = Errors.connection('CONNECTION_CLOSED', options)\n" +
      '      query && queryError(query, err)\n' +
      '      while (sent.length) queryError(sent.shift(), err)\n' +
      '      query = null\n' +
      '      return true\n' +
      '    }\n' +
      '    const x = socket.write(chunk, fn)\n',
  },
  {
    name: 'terminate forgets the buffered write it cancels',
    from: '    clearImmediate(nextWriteTimer)\n    if (socket) {\n',
    to: `    clearImmediate(nextWriteTimer)\n    nextWriteTimer = chunk = null ${MARK}\n    if (socket) {\n`,
  },
  {
    name: 'closed forgets the buffered write it cancels',
    from: "    clearImmediate(nextWriteTimer)\n    socket.removeListener('data', data)\n",
    to: `    clearImmediate(nextWriteTimer)\n    nextWriteTimer = chunk = null ${MARK}\n    socket.removeListener('data', data)\n`,
  },
  {
    name: 'closed fails every query still on the connection, after an error too',
    from: "    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))\n",
    to:
      `    ;(query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket)) ${MARK}\n` +
      '    query = null\n',
  },
  {
    name: 'a copy the server rejects after its end fails its stream',
    from: '  function errored(err) {\n    stream && (stream.destroy(err), stream = null)\n',
    to: `  function errored(err) {\n    stream && (stream.destroy(err), stream = null)\n    final && (final(err), final = null) ${MARK}\n`,
  },
  {
    name: 'the socket sends each write at once',
    from: '      keep_alive && socket.setKeepAlive && socket.setKeepAlive(true, 1000 * keep_alive)\n',
    to: `      keep_alive && socket.setKeepAlive && socket.setKeepAlive(true, 1000 * keep_alive)\n      socket.setNoDelay && socket.setNoDelay(true) ${MARK}\n`,
  },
];

/** The driver's source with every edit applied; throws when one no longer fits. */
export function patchDriverSource(source: string, file = 'connection.js'): string {
  let text = source;
  for (const edit of DRIVER_EDITS) {
    if (text.includes(edit.to)) continue;
    const at = text.indexOf(edit.from);
    if (at === -1 || text.indexOf(edit.from, at + 1) !== -1) {
      throw new Error(
        `postgres.js changed: "${edit.name}" no longer fits ${file}. ` +
          'Check whether the new version fixes it (src/db/postgres-driver-patch.ts) and update the edits.',
      );
    }
    text = text.slice(0, at) + edit.to + text.slice(at + edit.from.length);
  }
  return text;
}

/** connection.js of each build the package ships (ESM, CommonJS, Cloudflare). */
export function driverConnectionFiles(): string[] {
  const entry = fileURLToPath(import.meta.resolve('postgres')); // <package>/src/index.js
  const packageDir = path.dirname(path.dirname(entry));
  return ['src', path.join('cjs', 'src'), path.join('cf', 'src')]
    .map((dir) => path.join(packageDir, dir, 'connection.js'))
    .filter((file) => existsSync(file));
}

/** Applies the edits to the installed driver (npm's prepare); returns the files it changed. */
function patchInstalledDriver(): string[] {
  const changed: string[] = [];
  for (const file of driverConnectionFiles()) {
    const source = readFileSync(file, 'utf8');
    const patched = patchDriverSource(source, file);
    if (patched === source) continue;
    writeFileSync(file, patched);
    changed.push(file);
  }
  return changed;
}

/** Whether the build Node loads (ESM) carries every edit. */
export function isInstalledDriverPatched(): boolean {
  const [esm] = driverConnectionFiles();
  if (!esm) return false;
  const source = readFileSync(esm, 'utf8');
  return DRIVER_EDITS.every((edit) => source.includes(edit.to));
}

if (import.meta.main) {
  for (const file of patchInstalledDriver()) process.stdout.write(`patched ${file}\n`);
}
