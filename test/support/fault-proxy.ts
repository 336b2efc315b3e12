import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real server (PostgreSQL, Redis) that a test can cut: `reset`
 * closes every connection and stops listening (connections are refused), as a stopped server
 * does; `blackhole`
 * closes them and lets new ones hang unanswered, as an unreachable host does; `freeze` keeps
 * every connection open but carries nothing either way, as a cut network link does. `restore`
 * lets traffic through again.
 */
export interface FaultProxy {
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  via(url: string): string;
  cut(mode: 'reset' | 'blackhole' | 'freeze'): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let mode: 'pass' | 'reset' | 'blackhole' | 'freeze' = 'pass';
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.on('error', () => {});
    if (mode === 'blackhole' || mode === 'freeze') return; // accepted, never answered
    const upstream = connect(target.port, target.host);
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    via(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async cut(next) {
      mode = next;
      if (next === 'freeze') {
        // Unread bytes stay in kernel buffers: nothing reaches either side and nothing closes.
        for (const socket of sockets) socket.pause();
        return;
      }
      for (const socket of sockets) socket.resetAndDestroy();
      if (next === 'reset' && server.listening) await new Promise((resolve) => server.close(resolve));
    },
    async restore() {
      mode = 'pass';
      for (const socket of sockets) socket.resume();
      if (server.listening) return;
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      if (server.listening) await new Promise((resolve) => server.close(resolve));
    },
  };
}
