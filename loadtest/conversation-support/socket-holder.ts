/**
 * A child of bench:conversations (idle.ts) holding many idle conversation WebSockets outside the
 * benchmark process. One JSON command per stdin line, one JSON answer per stdout line: `connect`
 * (count sockets, socket i joins conversations[(offset + i) % n], open once `ready` arrived),
 * `stats` (after a full GC), `reset` (message counters), `close`. Exits when stdin closes.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import type { WebSocket } from 'ws';
import { fileLimits } from '../support/proc.ts';
import { openReadySocket, wsUrl } from '../support/sockets.ts';

interface ConnectCommand {
  op: 'connect';
  base: string;
  token: string;
  conversations: string[];
  count: number;
  offset: number;
  concurrency: number;
  timeoutMs: number;
  localAddress?: string;
}

const sockets = new Set<WebSocket>();
const counts = { unexpectedCloses: 0, messages: 0, doneChunks: 0 };
const closeCodes: Record<string, number> = {};
let closing = false;
const reply = (answer: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(answer)}\n`);
const fdLimit = () => fileLimits('self')?.soft ?? null;

async function connect(cmd: ConnectCommand): Promise<void> {
  const started = performance.now();
  const errors: Record<string, number> = {};
  const samples: Record<string, string> = {};
  let ok = 0;
  let next = 0;
  const onMessage = (data: Buffer) => {
    counts.messages++;
    // Cheap: the done chunk is the only one with "done":true.
    if (data.includes('"done":true')) counts.doneChunks++;
  };
  const worker = async () => {
    for (let i = next++; i < cmd.count; i = next++) {
      const url = wsUrl(cmd.base, cmd.conversations[(cmd.offset + i) % cmd.conversations.length] ?? '', cmd.token);
      try {
        const ws = await openReadySocket(url, { timeoutMs: cmd.timeoutMs, localAddress: cmd.localAddress, onMessage, onClose: (code) => {
          if (!sockets.delete(ws) || closing) return;
          counts.unexpectedCloses++;
          closeCodes[code] = (closeCodes[code] ?? 0) + 1;
        } });
        sockets.add(ws);
        ok++;
      } catch (err) {
        const kind = (err as { kind?: string }).kind ?? 'error';
        errors[kind] = (errors[kind] ?? 0) + 1;
        samples[kind] ??= (err as Error).message.slice(0, 300);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(cmd.concurrency, cmd.count)) }, worker));
  reply({ op: 'connect', ok, failed: cmd.count - ok, errors, samples, ms: performance.now() - started, open: sockets.size });
}

function stats(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const { rss, heapUsed, external } = process.memoryUsage();
  reply({ op: 'stats', open: sockets.size, ...counts, closeCodes, rss, heapUsed, external, fdLimit: fdLimit(), gc: gc !== undefined });
}

async function closeAll(): Promise<void> {
  closing = true;
  const n = sockets.size;
  for (const ws of sockets) ws.terminate();
  sockets.clear();
  await new Promise((resolve) => setImmediate(resolve));
  closing = false;
  reply({ op: 'close', closed: n });
}

let queue: Promise<void> = Promise.resolve();
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) return;
  const cmd = JSON.parse(line) as ConnectCommand | { op: 'stats' | 'reset' | 'close' };
  // One command at a time, in order.
  queue = queue
    .then(async () => {
      if (cmd.op === 'connect') return connect(cmd);
      if (cmd.op === 'stats') return stats();
      if (cmd.op === 'close') return closeAll();
      counts.messages = counts.doneChunks = 0;
      reply({ op: 'reset' });
    })
    .catch((err: unknown) => reply({ op: 'error', message: String((err as Error)?.stack ?? err) }));
});
lines.on('close', () => {
  closing = true;
  for (const ws of sockets) ws.terminate();
  process.exit(0);
});
reply({ op: 'hello', pid: process.pid, fdLimit: fdLimit() });
