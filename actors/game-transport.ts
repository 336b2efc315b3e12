import type { Server } from 'node:http';
import { matchMaker } from '@colyseus/core';
import type { Colocation } from '../src/http/types.ts';

/** Game clients' messages are small (a player's line, a capability result). */
const MAX_GAME_MESSAGE_BYTES = 64 * 1024;

/**
 * Colyseus' WebSocket side, on the same port as the HTTP API: `@colyseus/uwebsockets-transport`
 * on the uWS engine, `@colyseus/ws-transport` on node:http. Its clients connect to
 * `/<processId>/<roomId>` after matchmaking (`POST /matchmake/joinById/<conversationId>`, one
 * of our own routes), so it claims exactly those upgrade paths.
 */
export async function gameTransport(engine: 'uws' | 'node'): Promise<Colocation & { shutdown(): void }> {
  const claimsUpgrade = (path: string) => {
    const parts = path.split('/');
    return parts.length === 3 && parts[1] === matchMaker.processId && parts[2] !== '';
  };
  if (engine === 'uws') {
    const { uWebSocketsTransport } = await import('@colyseus/uwebsockets-transport');
    const transport = new uWebSocketsTransport({ maxPayloadLength: MAX_GAME_MESSAGE_BYTES });
    // The engine serves on this app and closes it; the transport's own shutdown only closes a
    // listen socket it never opened.
    return { claimsUpgrade, uwsApp: transport.app, shutdown: () => {} };
  }
  const { WebSocketTransport } = await import('@colyseus/ws-transport');
  const transport = new WebSocketTransport({ noServer: true, maxPayload: MAX_GAME_MESSAGE_BYTES });
  return {
    claimsUpgrade,
    attachNode(server: Server) {
      transport.attachToServer(server, { filter: (req) => claimsUpgrade(new URL(req.url ?? '/', 'http://x').pathname) });
    },
    shutdown: () => transport.shutdown(),
  };
}
