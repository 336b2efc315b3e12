import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import type uWS from 'uWebSockets.js';

const RECONNECT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 2_000;

/**
 * A socket to cork while a WebSocket upgrade completes after an await.
 *
 * uWS 20.57 can close such a socket right after `open` (uNetworking/uWebSockets#1929): the
 * outermost `res.cork` runs an HTTP step after its callback and, when the upgrade reallocated
 * the socket in place, reads the new WebSocket's memory as HTTP state; if those bytes say
 * "connection: close" it shuts the socket. Only the outermost cork runs that step, so the
 * upgrade runs inside another socket's cork. Upgrading uncorked avoids it too, but makes uWS
 * print a warning to stderr on every upgrade.
 *
 * That other socket is one request this process makes to its own port and never answers: a
 * pending response can be corked at any time, and it is not a user's connection. If it is lost
 * it is made again; until then upgrades cork their own socket, as uWS documents.
 */
export class CorkAnchor {
  readonly #path = `/.troupe-cork-anchor/${randomUUID()}`;
  #res: uWS.HttpResponse | null = null;
  #client: Socket | null = null;
  #target: { host: string; port: number } | null = null;
  #closed = false;
  #onReady: (() => void) | null = null;

  /** Registers the anchor's route, before the app's catch-all routes. */
  register(app: uWS.TemplatedApp): void {
    app.get(this.#path, (res) => {
      if (this.#res || this.#closed) {
        res.cork(() => res.writeStatus('409 Conflict').end('', true));
        return;
      }
      res.onAborted(() => {
        this.#res = null;
        this.#reconnectLater();
      });
      this.#res = res;
      this.#onReady?.();
    });
  }

  /** Connects to the listening app; resolves once the anchor holds (or after a short wait). */
  async connect(listenHost: string, port: number): Promise<void> {
    this.#target = { host: loopbackFor(listenHost), port };
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, CONNECT_TIMEOUT_MS).unref();
      this.#onReady = () => {
        clearTimeout(timer);
        this.#onReady = null;
        resolve();
      };
      this.#open();
    });
  }

  /** Runs `fn` inside the anchor's cork when it holds, else directly. */
  run(fn: () => void): void {
    if (this.#res) this.#res.cork(fn);
    else fn();
  }

  close(): void {
    this.#closed = true;
    this.#client?.destroy();
    this.#client = null;
  }

  #open(): void {
    const target = this.#target;
    if (!target || this.#closed) return;
    const client = connect(target.port, target.host);
    client.unref();
    client.on('error', () => {}); // 'close' follows; the server side reconnects on abort
    client.on('close', () => {
      if (this.#client === client) this.#client = null;
      if (!this.#res) this.#reconnectLater();
    });
    client.write(`GET ${this.#path} HTTP/1.1\r\nHost: ${target.host}\r\n\r\n`);
    this.#client = client;
  }

  #reconnectLater(): void {
    if (this.#closed || this.#client) return;
    setTimeout(() => this.#open(), RECONNECT_MS).unref();
  }
}

function loopbackFor(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}
