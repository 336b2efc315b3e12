import { afterAll } from 'vitest';
import { sweepLeftovers } from './leftovers.ts';

// Runs after every test file's own afterAll hooks: nothing a failed test started outlives it.
afterAll(sweepLeftovers);
