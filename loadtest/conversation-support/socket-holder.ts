/**
 * A child of bench:conversations holding idle conversation WebSockets outside the benchmark process.
 * One JSON command per stdin line, one JSON answer per stdout line, in turn: `connect` (count sockets,
 * socket i joins conversations[(offset + i) % n], open once `ready` arrived), `stats` (after a full GC),
 * `reset` (the done-chunk counter), `close`. Exits when stdin closes.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import type { WebSocket } from 'ws';
import { fileLimits } from '../support/proc.ts';
import { openReadySocket, wsUrl } from '../support/sockets.ts';

type Command = { op: 'connect' | 'stats' | 'reset' | 'close'; base: string; token: string; conversations: string[]; count: number;
  offset: number; concurrency: number; timeoutMs: number; localAddress?: string };

const sockets = new Set<WebSocket>();
const counts = { unexpectedCloses: 0, doneChunks: 0 };
let closing = false;

async function connect(cmd: Command) {
  const errors: Record<string, number> = {};
  let [ok, next] = [0, 0];
  const onMessage = (data: Buffer) => {
    // Cheap: the done chunk is the only message with "done":true.
    if (data.includes('"done":true')) counts.doneChunks++;
  };
  const worker = async () => {
    for (let i = next++; i < cmd.count; i = next++) {
      const url = wsUrl(cmd.base, cmd.conversations[(cmd.offset + i) % cmd.conversations.length] ?? '', cmd.token);
      try {
        const ws = await openReadySocket(url, { timeoutMs: cmd.timeoutMs, localAddress: cmd.localAddress, onMessage, onClose: () => {
          if (sockets.delete(ws) && !closing) counts.unexpectedCloses++;
        } });
        sockets.add(ws);
        ok++;
      } catch (err) {
        const kind = (err as { kind?: string }).kind ?? 'error';
        errors[kind] = (errors[kind] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(cmd.concurrency, cmd.count)) }, worker));
  return { ok, errors };
}

function closeAll(): void {
  closing = true;
  for (const ws of sockets) ws.terminate();
  sockets.clear();
}

async function answer(cmd: Command): Promise<Record<string, unknown>> {
  const started = performance.now();
  if (cmd.op === 'connect') return { ...(await connect(cmd)), ms: performance.now() - started };
  if (cmd.op === 'reset') counts.doneChunks = 0;
  if (cmd.op === 'close') {
    closeAll();
    await new Promise((resolve) => setImmediate(resolve));
    closing = false;
  }
  if (cmd.op !== 'stats') return {};
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const { rss, heapUsed } = process.memoryUsage();
  return { open: sockets.size, ...counts, rss, heapUsed, fdLimit: fileLimits('self')?.soft ?? null };
}

let queue: Promise<void> = Promise.resolve();
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  const cmd = JSON.parse(line) as Command;
  const reply = (body: Record<string, unknown>) => void process.stdout.write(`${JSON.stringify({ op: cmd.op, ...body })}\n`);
  queue = queue.then(() => answer(cmd)).then(reply, (err: unknown) => reply({ op: 'error', message: String((err as Error)?.stack ?? err) }));
});
lines.on('close', () => {
  closeAll();
  process.exit(0);
});
