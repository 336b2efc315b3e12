import type { RoomEvent } from '../rooms/events.ts';
import { decodeRoomFrame, handleRoomClientMessage } from '../rooms/protocol.ts';
import type { Resources } from '../resources.ts';
import { liveSocket } from './live-socket.ts';
import type { WebSocketHandler } from './types.ts';

/**
 * The room WebSocket: the room's events (`transcript`, `chunk`, `speaker`, `capability`,
 * `participant`, `ended`, `error`); the client sends `{content, speakerName?}` to speak and
 * `{type: "capability_result", callId, result}`. The room's actor may run in another process.
 */
export function roomSocket(resources: Resources, projectId: string, roomId: string): WebSocketHandler {
  const { roomActors: gateway, logger } = resources;
  return liveSocket<RoomEvent>({
    logger,
    what: 'room',
    subscribe: (listener, onLost) => gateway.subscribe(roomId, listener, onLost),
    onFrame: (data, reply) => handleRoomClientMessage(gateway, logger, { projectId, roomId, send: reply }, decodeRoomFrame(data)),
  });
}
