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
  let closing = false;
  ws.on('message', (data) => {
    const event = JSON.parse(String(data)) as Record<string, unknown>;
    failers.shift();
    const waiter = waiters.shift();
    if (waiter) waiter(event);
    else queue.push(event);
  });
  // A socket the server closed never sends what a test waits for: fail the wait at once, saying why.
  let closedBy: string | null = null;
  const failers: ((err: Error) => void)[] = [];
  // An error the client met (an invalid frame, a reset) explains the close that follows it.
  let clientError = '';
  ws.on('error', (err) => (clientError = `, after the client's error: ${err.message}`));
  ws.on('close', (code, reason) => {
    closedBy = `the server closed the socket (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''}${clientError})`;
    for (const fail of failers.splice(0)) fail(new Error(closedBy));
  });
  const take = (): Promise<Record<string, unknown>> => {
    if (queue.length > 0) return Promise.resolve(queue.shift() as Record<string, unknown>);
    if (closedBy !== null && !closing) return Promise.reject(new Error(closedBy));
    return new Promise((resolve, reject) => {
      waiters.push(resolve);
      failers.push(reject);
    });
  };
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
        closing = true;
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
