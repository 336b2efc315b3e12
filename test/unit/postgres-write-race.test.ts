import { describe, expect, it } from 'vitest';
import { isPostgresWriteAfterClose } from '../../src/db/postgres-write-race.ts';

describe('the postgres.js write-after-close exception', () => {
  it('is recognised by its message and where it was thrown, and nothing else is', () => {
    const race = new TypeError("Cannot read properties of null (reading 'write')");
    race.stack = `${race.message}\n    at Immediate.nextWrite (file:///app/node_modules/postgres/src/connection.js:255:22)\n    at process.processImmediate (node:internal/timers:505:21)`;
    expect(isPostgresWriteAfterClose(race)).toBe(true);
    const elsewhere = new TypeError("Cannot read properties of null (reading 'write')");
    elsewhere.stack = `${elsewhere.message}\n    at nextWrite (file:///app/src/http/uws.ts:10:1)`;
    expect(isPostgresWriteAfterClose(elsewhere)).toBe(false);
    expect(isPostgresWriteAfterClose(new Error('boom'))).toBe(false);
    expect(isPostgresWriteAfterClose('not an error')).toBe(false);
  });
});
