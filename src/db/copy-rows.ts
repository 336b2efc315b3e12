// Rows whose values are large bytes (a document's parts), written without turning the bytes into
// text on this thread. postgres.js sends every parameter as text: a 1 MiB bytea became 1.4-2 MiB
// of hex or base64 and was copied three more times on its way to the socket (the Bind message,
// its concatenation, the write), about 5 MiB of short-lived memory per part. V8 counts that memory
// towards its old generation, so a 50 MiB upload ran about a dozen full collections of the main
// heap. PostgreSQL's binary COPY takes the bytes as they are: postgres.js copies them once.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Sql } from 'postgres';

/** The column types these rows may hold; each has a fixed binary form. */
export type CopyColumnType = 'text' | 'int4' | 'bytea';
export interface CopyColumn {
  readonly name: string;
  readonly type: CopyColumnType;
}
export type CopyValue = string | number | Uint8Array;

/** Writes rows into a table, outside any transaction, in one statement. */
export type CopyRows = (table: string, columns: readonly CopyColumn[], rows: readonly (readonly CopyValue[])[]) => Promise<void>;

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const INT4_MIN = -(2 ** 31);
const INT4_MAX = 2 ** 31 - 1;

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** Throws unless `row` fits `columns`: the same check on every backend, before anything is sent. */
function checkRow(columns: readonly CopyColumn[], row: readonly CopyValue[]): void {
  if (row.length !== columns.length) throw new TypeError(`copy row has ${row.length} values for ${columns.length} columns`);
  for (const [i, column] of columns.entries()) {
    const value = row[i];
    const problem =
      column.type === 'bytea' ? (value instanceof Uint8Array ? null : 'expects bytes')
      : column.type === 'int4' ? (typeof value === 'number' && Number.isInteger(value) && value >= INT4_MIN && value <= INT4_MAX ? null : 'expects a 32-bit integer')
      : typeof value !== 'string' ? 'expects a string'
      : value.includes('\0') ? 'text cannot hold a NUL character'
      : null;
    if (problem) throw new TypeError(`copy of column ${column.name} (${column.type}): ${problem}`);
  }
}

/**
 * The binary COPY stream for rows that passed checkRow: header, each row, trailer. Small fields
 * are gathered into one buffer; a bytea value is yielded as it is, never copied here.
 */
function* binaryCopyFrames(columns: readonly CopyColumn[], rows: readonly (readonly CopyValue[])[]): Generator<Uint8Array> {
  let pending: Buffer[] = [SIGNATURE, Buffer.alloc(8)]; // flags and header extension: both zero
  const small = (bytes: Buffer) => void pending.push(bytes);
  const length = (n: number) => {
    const b = Buffer.allocUnsafe(4);
    b.writeInt32BE(n);
    return b;
  };
  for (const row of rows) {
    const count = Buffer.allocUnsafe(2);
    count.writeInt16BE(columns.length);
    small(count);
    for (const value of row) {
      if (value instanceof Uint8Array) {
        small(length(value.byteLength));
        yield Buffer.concat(pending);
        pending = [];
        yield value;
      } else if (typeof value === 'number') {
        const b = Buffer.allocUnsafe(8);
        b.writeInt32BE(4);
        b.writeInt32BE(value, 4);
        small(b);
      } else {
        const text = Buffer.from(value, 'utf8');
        small(length(text.byteLength));
        small(text);
      }
    }
  }
  const trailer = Buffer.allocUnsafe(2);
  trailer.writeInt16BE(-1);
  small(trailer);
  yield Buffer.concat(pending);
}

/** `"table" ("a", "b")`, the target both statements name. */
function target(table: string, columns: readonly CopyColumn[]): string {
  return `${quoteIdent(table)} (${columns.map((c) => quoteIdent(c.name)).join(', ')})`;
}

/**
 * CopyRows on a postgres.js client. The statement's failure (a key violation, a lost connection)
 * rejects with the driver's own error, as an INSERT's would.
 */
export function postgresCopyRows(client: Sql): CopyRows {
  return async (table, columns, rows) => {
    for (const row of rows) checkRow(columns, row);
    if (rows.length === 0) return;
    const stream = await client.unsafe(`copy ${target(table, columns)} from stdin (format binary)`).writable();
    await pipeline(Readable.from(binaryCopyFrames(columns, rows), { objectMode: false }), stream);
  };
}

/**
 * CopyRows as one INSERT, where the driver does not speak COPY (PGlite in its worker thread).
 * Bytes travel as base64 text, which its worker decodes faster than it parses hex.
 */
export function insertCopyRows(query: (sql: string, params: unknown[]) => Promise<unknown>): CopyRows {
  return async (table, columns, rows) => {
    for (const row of rows) checkRow(columns, row);
    if (rows.length === 0) return;
    const params: unknown[] = [];
    const cast = { text: (n: number) => `$${n}::text`, int4: (n: number) => `$${n}::int4`, bytea: (n: number) => `decode($${n}, 'base64')` };
    const tuples = rows.map((row) => `(${columns.map((column, i) => {
      const value = row[i];
      params.push(value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') : value);
      return cast[column.type](params.length);
    }).join(', ')})`);
    await query(`insert into ${target(table, columns)} values ${tuples.join(', ')}`, params);
  };
}
