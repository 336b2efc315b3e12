import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CopyColumn } from '../../src/db/copy-rows.ts';
import type { Database } from '../../src/db/database.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { openDatabaseOn } from '../support/databases.ts';
import { BACKENDS } from '../support/env.ts';

/**
 * Database.copyRows (src/db/copy-rows.ts): rows with large bytes, written as binary COPY on
 * PostgreSQL and as one INSERT on PGlite, with the same values, checks and errors on both.
 */
const COLUMNS: readonly CopyColumn[] = [
  { name: 'owner', type: 'text' },
  { name: 'n', type: 'int4' },
  { name: 'bytes', type: 'bytea' },
];

describe.each(BACKENDS)('copyRows on $kind', (backend) => {
  let opened: Awaited<ReturnType<typeof openDatabaseOn>>;
  let database: Database;
  const stored = async () =>
    rowsOf<{ owner: string; n: number; hex: string }>(
      await database.db.execute(sql`select owner, n, encode(bytes, 'hex') as hex from copy_probe order by owner, n`),
    );

  beforeAll(async () => {
    opened = await openDatabaseOn(backend);
    database = opened.database;
    await database.db.execute(sql`create table copy_owner (name text primary key)`);
    await database.db.execute(sql`create table copy_probe (owner text not null references copy_owner (name), n int4 not null, bytes bytea not null, primary key (owner, n))`);
    await database.db.execute(sql`insert into copy_owner values ('ärger "quoted"'), ('plain')`);
  }, 60_000);
  afterAll(async () => opened?.dispose());

  it('writes every byte value, text beyond ASCII and the ends of int4, as they are', async () => {
    const everyByte = Uint8Array.from({ length: 256 * 5 + 3 }, (_, i) => (i * 31) & 0xff);
    // A view into a larger buffer: only the view's bytes are written.
    const view = new Uint8Array(Buffer.from('xxABCyy')).subarray(2, 5);
    await database.copyRows('copy_probe', COLUMNS, [
      ['ärger "quoted"', -(2 ** 31), everyByte],
      ['ärger "quoted"', 2 ** 31 - 1, new Uint8Array(0)],
      ['plain', 0, view],
    ]);
    expect(await stored()).toEqual([
      { owner: 'plain', n: 0, hex: '414243' },
      { owner: 'ärger "quoted"', n: -(2 ** 31), hex: Buffer.from(everyByte).toString('hex') },
      { owner: 'ärger "quoted"', n: 2 ** 31 - 1, hex: '' },
    ]);
  });

  it('refuses values that do not fit their column before anything is written', async () => {
    const before = await stored();
    const bad: unknown[][] = [
      ['plain', 1, 'not bytes'],
      ['plain', 1.5, new Uint8Array(1)],
      ['plain', 2 ** 31, new Uint8Array(1)],
      ['pl\0ain', 1, new Uint8Array(1)],
      ['plain', 1],
    ];
    for (const row of bad) {
      // A good row first: the whole call is refused, not just the bad row.
      await expect(database.copyRows('copy_probe', COLUMNS, [['plain', 7, new Uint8Array(1)], row as never])).rejects.toThrow(TypeError);
    }
    expect(await stored()).toEqual(before);
  });

  it("fails with the database's own error on a key violation, writes none of the rows, and leaves the connections usable", async () => {
    const before = await stored();
    const violations: [string, unknown[][]][] = [
      ['23505', [['plain', 5, new Uint8Array(1)], ['plain', 0, new Uint8Array(2)]]], // the second row repeats a key
      ['23503', [['plain', 6, new Uint8Array(1)], ['nobody', 1, new Uint8Array(3)]]], // found at the statement's end
    ];
    for (const [code, rows] of violations) {
      await expect(database.copyRows('copy_probe', COLUMNS, rows as never)).rejects.toMatchObject({ code });
    }
    expect(await stored()).toEqual(before);
    // Every pooled connection answers, and takes the next copy.
    await Promise.all(Array.from({ length: 8 }, () => database.ping()));
    await database.copyRows('copy_probe', COLUMNS, [['plain', 9, new Uint8Array([9])]]);
    expect((await stored()).find((row) => row.n === 9)).toEqual({ owner: 'plain', n: 9, hex: '09' });
  });

  it('writes nothing for no rows', async () => {
    const before = await stored();
    await database.copyRows('copy_probe', COLUMNS, []);
    expect(await stored()).toEqual(before);
  });
});
