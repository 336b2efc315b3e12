import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/errors.ts';

/** How drizzle reports a failed statement: its own error, the driver's as the cause. */
const viaDrizzle = (cause: Error) => new Error('Failed query: insert into document_chunks ...', { cause });

describe('isDatabaseUnavailable', () => {
  it("is true for the connection errors of PGlite's thread client and postgres.js, through drizzle", () => {
    for (const code of ['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'ECONNREFUSED', 'ACQUIRE_TIMEOUT', '57P01', '08006']) {
      expect(isDatabaseUnavailable(viaDrizzle(Object.assign(new Error('gone'), { code })))).toBe(true);
    }
  });

  it('is false for errors the statement or the document caused', () => {
    expect(isDatabaseUnavailable(viaDrizzle(Object.assign(new Error('duplicate key'), { code: '23505' })))).toBe(false);
    expect(isDatabaseUnavailable(new Error('The document contains no text.'))).toBe(false);
    expect(isDatabaseUnavailable('CONNECTION_CLOSED')).toBe(false);
  });
});
