/**
 * A child of bench:conversations holding idle conversation WebSockets outside the benchmark process. One JSON command per
 * stdin line, one JSON answer per stdout line, in turn: `connect` (count sockets, socket i joins conversations[(offset + i) % n],
 * open once `ready` arrived), `close` (all sockets) or `stats` (after a full GC). Exits, closing every socket, when stdin closes. */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import type { WebSocket } from 'ws';
import { fileLimits } from '../support/proc.ts';
import { openReadySocket, wsUrl } from '../support/sockets.ts';

type Command = { op: 'connect' | 'close' | 'stats'; base: string; token: string; conversations: string[]; count: number; offset: number;
  concurrency: number; timeoutMs: number; localAddress?: string };
const sockets = new Set<WebSocket>();
const counts = { unexpectedCloses: 0, doneChunks: 0 };
async function connect(cmd: Command) {
  const [started, errors] = [performance.now(), {} as Record<string, number>];
  let [ok, next] = [0, 0];
  // Cheap: the done chunk is the only message with "done":true.
  const onMessage = (data: Buffer) => (counts.doneChunks += data.includes('"done":true') ? 1 : 0);
  const worker = async () => {
    for (let i = next++; i < cmd.count; i = next++) {
      const url = wsUrl(cmd.base, cmd.conversations[(cmd.offset + i) % cmd.conversations.length] ?? '', cmd.token);
      try {
        const onClose = () => (counts.unexpectedCloses += sockets.delete(ws) ? 1 : 0);
        const ws = await openReadySocket(url, { timeoutMs: cmd.timeoutMs, localAddress: cmd.localAddress, onMessage, onClose });
        sockets.add(ws);
        ok++;
      } catch (err) {
        const kind = (err as { kind?: string }).kind ?? 'error';
        errors[kind] = (errors[kind] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(cmd.concurrency, cmd.count)) }, worker));
  return { ok, errors, ms: performance.now() - started };
}
/** Closed on purpose: out of the set first, so they do not count as unexpected closes. */
function closeAll() {
  const open = [...sockets];
  sockets.clear();
  for (const ws of open) ws.terminate();
  return {};
}
function stats() {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const { rss, heapUsed } = process.memoryUsage();
  return { open: sockets.size, ...counts, rss, heapUsed, fdLimit: fileLimits('self')?.soft ?? null };
}
const lines = createInterface({ input: process.stdin });
lines.on('close', () => process.exit(0)); // the sockets close with the process
// One command at a time, in order.
for await (const line of lines) {
  const cmd = JSON.parse(line) as Command;
  const answer = async () => (cmd.op === 'connect' ? await connect(cmd) : cmd.op === 'close' ? closeAll() : stats());
  const body = await answer().catch((err: unknown) => ({ op: 'error', message: String((err as Error)?.stack ?? err) }));
  process.stdout.write(`${JSON.stringify({ op: cmd.op, ...body })}\n`);
}
