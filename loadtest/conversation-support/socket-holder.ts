/**
 * A child process of the conversations benchmark that opens and then holds many idle
 * conversation WebSockets (the `ws` client), so the sockets' client side lives outside the
 * benchmark process: one process may not have enough file descriptors, and its memory is
 * counted apart from Troupe's.
 *
 * Protocol: one JSON command per line on stdin, one JSON answer per line on stdout.
 *   {"op":"connect","base":"ws://127.0.0.1:P","token":"…","conversations":["c1",…],"count":N,
 *    "offset":K,"concurrency":C,"timeoutMs":T,"localAddress":"127.0.0.1"?}
 *       opens N sockets; socket i joins conversation (K + i) mod len. A socket counts as open
 *       once the server's {"type":"ready"} arrived (the server subscribed it by then).
 *   {"op":"stats"}   full GC when --expose-gc is on, then memory and socket counts
 *   {"op":"reset"}   zeroes the message counters
 *   {"op":"close"}   terminates every socket
 * The process exits when stdin closes.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { WebSocket } from 'ws';
import { openFileLimit } from './proc.ts';

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

type Command = ConnectCommand | { op: 'stats' } | { op: 'reset' } | { op: 'close' };

const sockets = new Set<WebSocket>();
let unexpectedCloses = 0;
const closeCodes: Record<string, number> = {};
let messages = 0;
let doneChunks = 0;
let closing = false;

function reply(answer: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}

function errorKind(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code) return code;
  const status = /Unexpected server response: (\d+)/.exec(err.message);
  return status ? `http_${status[1]}` : err.message.slice(0, 60);
}

/** Opens one socket; resolves null when it is open and ready, else the failure kind and message. */
function open(url: string, timeoutMs: number, localAddress: string | undefined): Promise<{ kind: string; message: string } | null> {
  return new Promise((resolve) => {
    let settled = false;
    const ws = new WebSocket(url, {
      perMessageDeflate: false,
      handshakeTimeout: timeoutMs,
      ...(localAddress ? { localAddress } : {}),
    });
    const timer = setTimeout(() => finish({ kind: 'ready_timeout', message: `no ready within ${timeoutMs} ms` }), timeoutMs);
    const finish = (failure: { kind: string; message: string } | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (failure) ws.terminate();
      resolve(failure);
    };
    ws.on('error', (err: Error) => finish({ kind: errorKind(err), message: err.message }));
    ws.on('close', (code: number) => {
      if (!settled) finish({ kind: `closed_${code}`, message: `closed with ${code} before ready` });
      else if (sockets.delete(ws) && !closing) {
        unexpectedCloses++;
        closeCodes[code] = (closeCodes[code] ?? 0) + 1;
      }
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!settled) {
        const text = isBinary ? '' : data.toString('utf8');
        if (text.includes('"ready"')) {
          sockets.add(ws);
          finish(null);
        } else {
          finish({ kind: 'unexpected_first_message', message: text.slice(0, 200) });
        }
        return;
      }
      messages++;
      // Cheap: the done chunk is the only one with "done":true.
      if (data.includes('"done":true')) doneChunks++;
    });
  });
}

async function connect(cmd: ConnectCommand): Promise<void> {
  const started = performance.now();
  const errors: Record<string, number> = {};
  const samples: Record<string, string> = {};
  let ok = 0;
  let next = 0;
  const worker = async () => {
    while (next < cmd.count) {
      const i = next++;
      const conversation = cmd.conversations[(cmd.offset + i) % cmd.conversations.length];
      const url = `${cmd.base}/conversations/${conversation}/ws?token=${encodeURIComponent(cmd.token)}`;
      const failure = await open(url, cmd.timeoutMs, cmd.localAddress);
      if (failure === null) {
        ok++;
      } else {
        errors[failure.kind] = (errors[failure.kind] ?? 0) + 1;
        samples[failure.kind] ??= failure.message.slice(0, 300);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(cmd.concurrency, cmd.count)) }, () => worker()));
  reply({ op: 'connect', ok, failed: cmd.count - ok, errors, samples, ms: performance.now() - started, open: sockets.size });
}

function stats(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc === 'function') {
    gc();
    gc();
  }
  const mem = process.memoryUsage();
  reply({
    op: 'stats',
    open: sockets.size,
    unexpectedCloses,
    closeCodes,
    messages,
    doneChunks,
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    external: mem.external,
    fdLimit: openFileLimit('self'),
    gc: typeof gc === 'function',
  });
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
  let cmd: Command;
  try {
    cmd = JSON.parse(line) as Command;
  } catch {
    reply({ op: 'error', message: `not JSON: ${line.slice(0, 100)}` });
    return;
  }
  // One command at a time, in order.
  queue = queue.then(async () => {
    switch (cmd.op) {
      case 'connect':
        return connect(cmd);
      case 'stats':
        return stats();
      case 'reset':
        messages = 0;
        doneChunks = 0;
        return reply({ op: 'reset' });
      case 'close':
        return closeAll();
      default:
        return reply({ op: 'error', message: `unknown op in ${line.slice(0, 100)}` });
    }
  }).catch((err: unknown) => reply({ op: 'error', message: String((err as Error)?.stack ?? err) }));
});
lines.on('close', () => {
  closing = true;
  for (const ws of sockets) ws.terminate();
  process.exit(0);
});
reply({ op: 'hello', pid: process.pid, fdLimit: openFileLimit('self') });
