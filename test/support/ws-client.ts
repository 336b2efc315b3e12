import WebSocket from 'ws';

export interface TestSocket {
  ws: WebSocket;
  send(message: unknown): void;
  /** The next server event (optionally of one type, skipping others), waiting for it if needed. */
  next(type?: string): Promise<Record<string, unknown>>;
  /** Collects chunk events until one with done: true; returns the text. Throws on an `error` event. */
  reply(): Promise<string>;
  close(): Promise<void>;
}

/** Opens the conversation socket with the real `ws` client; rejects with the HTTP status if refused. */
export function openSocket(url: string): Promise<TestSocket> {
  const ws = new WebSocket(url);
  const queue: Record<string, unknown>[] = [];
  const waiters: ((e: Record<string, unknown>) => void)[] = [];
  ws.on('message', (data) => {
    const event = JSON.parse(String(data)) as Record<string, unknown>;
    const waiter = waiters.shift();
    if (waiter) waiter(event);
    else queue.push(event);
  });
  const take = (): Promise<Record<string, unknown>> =>
    queue.length > 0 ? Promise.resolve(queue.shift() as Record<string, unknown>) : new Promise((resolve) => waiters.push(resolve));
  const socket: TestSocket = {
    ws,
    send: (message) => ws.send(typeof message === 'string' ? message : JSON.stringify(message)),
    async next(type) {
      for (;;) {
        const event = await take();
        if (!type || event.type === type) return event;
        // Waiting for something else, an error means it will never come: say so at once.
        if (event.type === 'error') throw new Error(`error event while waiting for '${type}': ${JSON.stringify(event)}`);
      }
    },
    async reply() {
      let text = '';
      for (;;) {
        const event = await take();
        // A failed reply never sends `done`: fail with its message rather than wait forever.
        if (event.type === 'error') throw new Error(`error event while waiting for a reply: ${String(event.message)}`);
        if (event.type !== 'chunk') continue;
        text += String(event.content);
        if (event.done === true) return text;
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        if (ws.readyState === WebSocket.CLOSED) return resolve();
        ws.once('close', () => resolve());
        ws.close();
      }),
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(socket));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`refused with HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}
