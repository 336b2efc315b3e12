import { afterAll, beforeEach, onTestFailed } from 'vitest';
import { sweepLeftovers } from './leftovers.ts';
import { liveTestServers } from './server.ts';

// Runs after every test file's own afterAll hooks: nothing a failed test started outlives it.
afterAll(sweepLeftovers);

// A failing test shows the last log lines of every in-process server it ran against (rare CI
// failures are then explained by what the server saw).
beforeEach(() =>
  onTestFailed(() => {
    for (const server of liveTestServers) console.error(`--- last log lines of ${server.url}\n${server.rawLogs.slice(-30).join('\n')}`);
  }),
);
