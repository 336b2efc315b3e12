import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { RoomEvent } from '../rooms/events.ts';
import type { RoomAgentMessage, RoomLink } from './room-voice-agent.ts';

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 5_000;

export interface RoomSocketLinkOptions {
  /** Troupe's base URL (http:// or https://). */
  baseUrl: string;
  roomId: string;
  /** An agent token (src/rooms/agent-token.ts), made fresh for each connection. */
  token: () => Promise<string>;
  /** Every room event, `ready` included (sent again after each reconnection). */
  onEvent: (event: RoomEvent) => void;
  logger: Logger;
}

/**
 * A voice agent's room WebSocket: the same socket and protocol as any room client, with an
 * agent token. It reconnects until closed or the room ends; what the agent says while it is
 * away is sent once it is back, in order.
 */
export class RoomSocketLink implements RoomLink {
  readonly #options: RoomSocketLinkOptions;
  readonly #outbox: string[] = [];
  #ws: WebSocket | null = null;
  #ready = false;
  #closed = false;
  #retryMs = RETRY_FIRST_MS;
  #timer: NodeJS.Timeout | null = null;

  constructor(options: RoomSocketLinkOptions) {
    this.#options = options;
  }

  /** Resolves once the room said `ready` the first time; rejects if that first connection fails. */
  connect(): Promise<void> {
    return new Promise((resolve, reject) => this.#open(resolve, reject));
  }

  send(message: RoomAgentMessage): void {
    const text = JSON.stringify(message);
    if (this.#ready && this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(text);
    else if (!this.#closed) this.#outbox.push(text);
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#ws?.close(1000, 'agent leaving');
  }

  #open(onReady?: () => void, onFail?: (err: Error) => void): void {
    const { baseUrl, roomId, logger } = this.#options;
    this.#options.token().then(
      (token) => {
        if (this.#closed) return;
        const url = `${baseUrl.replace(/^http/, 'ws').replace(/\/$/, '')}/v1/rooms/${encodeURIComponent(roomId)}/ws?token=${encodeURIComponent(token)}`;
        const ws = new WebSocket(url);
        this.#ws = ws;
        ws.on('message', (data) => {
          const wasReady = this.#ready;
          this.#receive(String(data));
          if (!wasReady && this.#ready) {
            // Connected: from now on a lost socket is retried, not a failed start.
            onFail = undefined;
            onReady?.();
            onReady = undefined;
          }
        });
        ws.on('unexpected-response', (_req, res) => {
          const err = new Error(`the room WebSocket was refused with HTTP ${res.statusCode}`);
          logger.warn({ roomId, status: res.statusCode }, 'room WebSocket refused');
          if (onFail && !this.#ready) onFail(err);
          onFail = undefined;
        });
        ws.on('error', (err) => logger.warn({ err, roomId }, 'room WebSocket error'));
        ws.on('close', (code) => {
          this.#ready = false;
          if (this.#closed) return;
          if (onFail) {
            onFail(new Error(`the room WebSocket closed before it was ready (${code})`));
            return;
          }
          this.#retry();
        });
      },
      (err: unknown) => onFail?.(err as Error),
    );
  }

  #receive(text: string): void {
    let event: RoomEvent;
    try {
      event = JSON.parse(text) as RoomEvent;
    } catch {
      return;
    }
    if (event.type === 'ready') {
      this.#ready = true;
      this.#retryMs = RETRY_FIRST_MS;
      for (const message of this.#outbox.splice(0)) this.#ws?.send(message);
    }
    this.#options.onEvent(event);
    if (event.type === 'ended') this.close();
  }

  #retry(): void {
    const delay = this.#retryMs;
    this.#retryMs = Math.min(this.#retryMs * 2, RETRY_MAX_MS);
    this.#timer = setTimeout(() => this.#open(), delay);
  }
}
