import { describe, expect, it } from 'vitest';
import { runChunkWrites, type ChunkWrite } from '../../src/retrieval/chunk-write-pipeline.ts';

/** Steps whose prepare and run settle only when the test says so, with what happened in order. */
function controlledSteps(count: number) {
  const events: string[] = [];
  const pending = new Map<string, { resolve: () => void; reject: (err: Error) => void }>();
  const waiters: (() => void)[] = [];
  const hold = (name: string) =>
    new Promise<void>((resolve, reject) => {
      events.push(`${name} started`);
      pending.set(name, { resolve, reject });
      for (const wake of waiters.splice(0)) wake();
    });
  const steps: ChunkWrite[] = Array.from({ length: count }, (_, i) => ({
    prepare: () => hold(`prepare ${i}`),
    run: () => hold(`run ${i}`),
  }));
  /** Resolves once `name` has started (or at once if it has). */
  const started = async (name: string): Promise<void> => {
    while (!pending.has(name)) await new Promise<void>((wake) => waiters.push(wake));
  };
  const settle = async (name: string, err?: Error) => {
    await started(name);
    const step = pending.get(name)!;
    if (err) step.reject(err);
    else step.resolve();
  };
  return { events, steps, started, settle };
}

describe('runChunkWrites', () => {
  it('builds the next step while the current one runs, and runs them in order', async () => {
    const { events, steps, settle, started } = controlledSteps(3);
    const done = runChunkWrites(steps, async (write) => {
      await write.run(null as never);
      return true;
    });
    await settle('prepare 0');
    await started('run 0');
    // Step 1 is being built while step 0 runs, and step 2 waits for step 1 to be taken.
    expect(events).toEqual(['prepare 0 started', 'prepare 1 started', 'run 0 started']);
    await settle('prepare 1');
    await settle('run 0');
    await settle('prepare 2');
    await settle('run 1');
    await settle('run 2');
    await expect(done).resolves.toBe(true);
    expect(events).toEqual(['prepare 0 started', 'prepare 1 started', 'run 0 started', 'prepare 2 started', 'run 1 started', 'run 2 started']);
  });

  it('stops when a step reports the claim lost, after the step being built has settled', async () => {
    const { events, steps, settle, started } = controlledSteps(3);
    let stopped = false;
    const done = runChunkWrites(steps, () => Promise.resolve(false)).then((result) => ((stopped = true), result));
    await settle('prepare 0');
    await started('prepare 1');
    await new Promise((turn) => setImmediate(turn)); // every settled promise has run on by now
    expect(stopped).toBe(false);
    await settle('prepare 1');
    await expect(done).resolves.toBe(false);
    expect(events).not.toContain('prepare 2 started');
  });

  it('rethrows a failed run once the step being built has settled, and a failed build does not count as unhandled', async () => {
    const { steps, settle } = controlledSteps(2);
    const done = runChunkWrites(steps, async (write) => {
      await write.run(null as never);
      return true;
    });
    await settle('prepare 0');
    await settle('prepare 1', new Error('an embedding holds a value that is not a finite number'));
    await settle('run 0', new Error('database unavailable'));
    await expect(done).rejects.toThrow('database unavailable');
  });

  it('rethrows a failed build before running its step', async () => {
    const { events, steps, settle } = controlledSteps(2);
    const done = runChunkWrites(steps, async (write) => {
      await write.run(null as never);
      return true;
    });
    await settle('prepare 0');
    await settle('prepare 1', new Error('not finite'));
    await settle('run 0');
    await expect(done).rejects.toThrow('not finite');
    expect(events).not.toContain('run 1 started');
  });

  it('does nothing for no steps', async () => {
    await expect(runChunkWrites([], () => Promise.reject(new Error('never called')))).resolves.toBe(true);
  });
});
