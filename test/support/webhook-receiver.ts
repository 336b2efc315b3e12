import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  path: string;
  body: Record<string, unknown>;
  signatureValid: boolean;
  headers: IncomingMessage['headers'];
}

/**
 * A game server's webhook endpoint for tests: verifies `x-troupe-signature` the way the README
 * tells receivers to, records each call, and answers with what the test queued for that path.
 */
export async function startWebhookReceiver(secret: () => string) {
  const received: ReceivedWebhook[] = [];
  const waiters: ((w: ReceivedWebhook) => void)[] = [];
  let taken = 0;
  const replies = new Map<string, { status: number; body: unknown }>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const webhook: ReceivedWebhook = {
        path: req.url ?? '/',
        body: JSON.parse(raw) as Record<string, unknown>,
        signatureValid: verify(secret(), raw, String(req.headers['x-troupe-signature'] ?? '')),
        headers: req.headers,
      };
      received.push(webhook);
      const waiter = waiters.shift();
      if (waiter) {
        taken++;
        waiter(webhook);
      }
      const reply = replies.get(webhook.path) ?? { status: 200, body: { ok: true } };
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    received,
    reply(path: string, status: number, body: unknown) {
      replies.set(path, { status, body });
    },
    /** The next webhook to arrive (or one that already arrived and was not taken). */
    next(): Promise<ReceivedWebhook> {
      const ready = received[taken];
      if (ready) {
        taken++;
        return Promise.resolve(ready);
      }
      return new Promise((resolve) => waiters.push(resolve));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function verify(secret: string, body: string, header: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(`${match[1]}.${body}`).digest('hex');
  return timingSafeEqual(Buffer.from(expected), Buffer.from(match[2] ?? ''));
}
