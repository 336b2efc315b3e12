import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/support/setup.ts'],
    // Each e2e file starts real servers and databases; forks isolate native and wasm state.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
