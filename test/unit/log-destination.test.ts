import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogDestination } from '../../src/observability/log-destination.ts';

const MODULE = fileURLToPath(new URL('../../src/observability/log-destination.ts', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempFile(): { path: string; fd: number } {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-log-'));
  dirs.push(dir);
  const path = join(dir, 'out.log');
  return { path, fd: openSync(path, 'w') };
}

describe('log destination', () => {
  it('writes every line in order, multi-byte text intact, once flushed', async () => {
    const { path, fd } = tempFile();
    const destination = createLogDestination(fd);
    const lines = Array.from({ length: 5_000 }, (_, i) => `{"n":${i},"text":"héllo ✓ 🎭 ${'x'.repeat(i % 300)}"}\n`);
    for (const line of lines) destination.write(line);
    await new Promise<void>((resolve, reject) => destination.flush((err) => (err ? reject(err) : resolve())));
    closeSync(fd);
    expect(readFileSync(path, 'utf8')).toBe(lines.join(''));
  });

  it('writes a few lines without being asked, shortly after', async () => {
    const { path, fd } = tempFile();
    const destination = createLogDestination(fd);
    destination.write('{"msg":"one"}\n');
    destination.write('{"msg":"two"}\n');
    expect(readFileSync(path, 'utf8')).toBe(''); // held for the batch
    await expect.poll(() => readFileSync(path, 'utf8'), { timeout: 5_000 }).toBe('{"msg":"one"}\n{"msg":"two"}\n');
    closeSync(fd);
  });

  it('loses nothing to a slow pipe reader, and writes what is held when the process exits', async () => {
    const lines = 40_000;
    const script = `
      import { createLogDestination } from ${JSON.stringify(MODULE)};
      const destination = createLogDestination(1);
      process.once('exit', () => destination.flushSync());
      for (let i = 0; i < ${lines}; i++) destination.write('{"n":' + i + ',"pad":"' + 'y'.repeat(100) + '"}\\n');
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks: Buffer[] = [];
    // Read slowly, so the pipe fills and the writer meets EAGAIN and partial writes.
    child.stdout.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      child.stdout.pause();
      setImmediate(() => child.stdout.resume());
    });
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(0);
    const received = Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean);
    expect(received).toHaveLength(lines);
    received.forEach((line, i) => expect((JSON.parse(line) as { n: number }).n).toBe(i));
  });

  it('drops lines past its limit while stdout is not read, and says how many once it is', async () => {
    const lines = 20_000;
    const script = `
      import { createLogDestination } from ${JSON.stringify(MODULE)};
      const destination = createLogDestination(1, { maxPendingBytes: 256 * 1024 });
      process.once('exit', () => destination.flushSync());
      for (let i = 0; i < ${lines}; i++) destination.write('{"n":' + i + ',"pad":"' + 'z'.repeat(100) + '"}\\n');
      process.stderr.write('written\\n');
      process.stdin.once('data', () => destination.flush(() => {
        destination.write('{"after":true}\\n');
        destination.flush(() => process.exit(0));
      }));
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout.pause(); // nobody reads stdout until the child has written everything
    await new Promise<void>((resolve) => child.stderr.once('data', () => resolve()));
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stdout.resume();
    child.stdin.write('go\n');
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(0);
    const received = Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { n?: number; dropped?: number; after?: boolean; msg?: string });
    const numbered = received.filter((l) => l.n !== undefined);
    expect(numbered.length).toBeGreaterThan(0);
    expect(numbered.length).toBeLessThan(lines);
    numbered.forEach((l, i) => expect(l.n).toBe(i)); // a prefix, in order: the rest was dropped
    const notice = received.at(-2);
    expect(notice?.msg).toBe('log lines dropped: stdout was not read');
    expect(notice?.dropped).toBe(lines - numbered.length);
    expect(received.at(-1)).toEqual({ after: true });
  });
});
