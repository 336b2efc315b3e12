/** Conversation WebSockets, for the benchmark and its socket-holder children alike (no Troupe imports: holders stay small). */
import { WebSocket } from 'ws';

export const wsUrl = (base: string, conversationId: string, token: string | null): string =>
  `${base.replace(/^http/, 'ws')}/conversations/${conversationId}/ws?token=${encodeURIComponent(token ?? '')}`;
type SocketOptions = {
  timeoutMs: number; localAddress?: string; onMessage?: (data: Buffer, atMicros: number) => void; onClose?: (code: number) => void;
};
/** Resolves once the socket's first message, `ready`, arrived; then every message goes to onMessage with its
 * CLOCK_MONOTONIC µs arrival. Fails with an error whose `kind` counts failures alike (ECONNRESET, http_503, closed_1006...). */
export function openReadySocket(url: string, options: SocketOptions): Promise<WebSocket> {
  const { timeoutMs, localAddress } = options;
  return new Promise((resolve, reject) => {
    let settled = false;
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs, ...(localAddress ? { localAddress } : {}) });
    const fail = (kind: string, message: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.terminate();
      reject(Object.assign(new Error(message), { kind }));
    };
    const timer = setTimeout(() => fail('ready_timeout', `no ready within ${timeoutMs} ms`), timeoutMs);
    ws.on('error', (err: Error) => {
      const status = /Unexpected server response: (\d+)/.exec(err.message);
      fail((err as NodeJS.ErrnoException).code ?? (status ? `http_${status[1]}` : err.message.slice(0, 60)), err.message);
    });
    ws.on('close', (code: number) => (settled ? options.onClose?.(code) : fail(`closed_${code}`, `closed with ${code} before ready`)));
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const at = Number(process.hrtime.bigint()) / 1000;
      if (settled) return options.onMessage?.(data, at);
      const text = isBinary ? '' : data.toString('utf8');
      if (!text.includes('"ready"')) return fail('unexpected_first_message', text.slice(0, 200));
      settled = true;
      clearTimeout(timer);
      resolve(ws);
    });
  });
}
