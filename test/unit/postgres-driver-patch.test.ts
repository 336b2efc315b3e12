import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DRIVER_EDITS, driverConnectionFiles, isInstalledDriverPatched, patchDriverSource } from '../../src/db/postgres-driver-patch.ts';

/** The released driver's text around each edit, with unrelated lines between them. */
const released = DRIVER_EDITS.map((edit, i) => `  // unrelated ${i}\n${edit.from}`).join('');

describe('the postgres.js patch', () => {
  it('applies every edit to the released text, once', () => {
    const patched = patchDriverSource(released);
    for (const edit of DRIVER_EDITS) {
      expect(patched).toContain(edit.to);
      expect(patched.split(edit.to)).toHaveLength(2);
    }
    for (let i = 0; i < DRIVER_EDITS.length; i++) expect(patched).toContain(`// unrelated ${i}`);
  });

  it('leaves patched text as it is', () => {
    const patched = patchDriverSource(released);
    expect(patchDriverSource(patched)).toBe(patched);
  });

  it('refuses a driver whose text changed, naming the edit that no longer fits', () => {
    const [first] = DRIVER_EDITS;
    const changed = released.replace(first?.from ?? '', '  function nextWrite(fn, more) {\n');
    expect(() => patchDriverSource(changed, 'connection.js')).toThrow(/postgres\.js changed: "a write with no socket/);
    const twice = released + (first?.from ?? '');
    expect(() => patchDriverSource(twice)).toThrow(/no longer fits/);
  });

  it('is applied to every build the installed package ships', () => {
    const files = driverConnectionFiles();
    expect(files.length).toBeGreaterThanOrEqual(2); // ESM and CommonJS at least
    for (const file of files) {
      const source = readFileSync(file, 'utf8');
      for (const edit of DRIVER_EDITS) expect(source, file).toContain(edit.to);
    }
    expect(isInstalledDriverPatched()).toBe(true); // what the PostgreSQL backend checks at start
  });
});
