import type { ChildProcess } from 'node:child_process';

/**
 * What tests start outside their own process: Troupe children and temporary PostgreSQL
 * databases. A test that fails or times out may never reach its own cleanup, so the setup file
 * (test/support/setup.ts) sweeps whatever is left after each test file.
 */
const children = new Set<ChildProcess>();
const databases = new Map<string, () => Promise<void>>();

export function trackChild(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

export function trackDatabase(name: string, drop: () => Promise<void>): () => Promise<void> {
  databases.set(name, drop);
  return async () => {
    databases.delete(name);
    await drop();
  };
}

export async function sweepLeftovers(): Promise<void> {
  for (const child of children) child.kill('SIGKILL');
  await Promise.all([...children].map((child) => (child.exitCode === null && child.signalCode === null ? new Promise((r) => child.once('exit', r)) : null)));
  const drops = [...databases.values()];
  databases.clear();
  await Promise.allSettled(drops.map((drop) => drop()));
}

// A worker that exits without its afterAll hooks still takes its children along.
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});
