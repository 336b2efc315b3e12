import { readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

const MODULE = fileURLToPath(new URL('../../src/thread-priority.ts', import.meta.url));

/** A thread's nice value, from /proc (field 19 of its stat line). */
function niceOf(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

describe.runIf(process.platform === 'linux')('runBelowNormalPriority', () => {
  it('lowers the calling worker thread only, not the process', async () => {
    const worker = new Worker(
      `import { runBelowNormalPriority } from ${JSON.stringify(MODULE)};
       import { parentPort } from 'node:worker_threads';
       import { readFileSync } from 'node:fs';
       runBelowNormalPriority();
       // The thread's own id, as /proc/thread-self names it.
       parentPort.postMessage(Number(readFileSync('/proc/thread-self/stat', 'utf8').split(' ')[0]));
       parentPort.once('message', () => process.exit(0));`,
      { eval: true },
    );
    const tid = await new Promise<number>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    expect(niceOf(tid)).toBe(10);
    expect(getPriority()).toBe(0);
    expect(niceOf(process.pid)).toBe(0);
    worker.postMessage('done');
    await new Promise((resolve) => worker.once('exit', resolve));
  });
});
