import type { RoomEvent } from '../rooms/events.ts';
import { decodeRoomFrame, handleRoomClientMessage } from '../rooms/protocol.ts';
import type { Resources } from '../resources.ts';
import { liveSocket } from './live-socket.ts';
import type { WebSocketHandler } from './types.ts';

/**
 * The room WebSocket: the room's events (`transcript`, `chunk`, `speaker`, `capability`,
 * `participant`, `ended`, `error`); the client sends `{content, speakerName?}` to speak and
 * `{type: "capability_result", callId, result}`; a character's voice agent also reports
 * `{type: "spoken", replyId, text, interrupted}`. The room's actor may run in another process.
 */
export function roomSocket(resources: Resources, projectId: string, roomId: string, agentOf?: string): WebSocketHandler {
  const { roomActors: gateway, logger } = resources;
  return liveSocket<RoomEvent>({
    logger,
    what: 'room',
    subscribe: async (listener, onLost) => {
      const stop = await gateway.subscribe(roomId, listener, onLost);
      if (agentOf === undefined) return stop;
      // A character's voice agent: from its `ready` on, the room waits for its lines to be spoken.
      try {
        await gateway.voice(projectId, roomId, agentOf, true);
      } catch (err) {
        stop();
        throw err;
      }
      return () => {
        stop();
        gateway.voice(projectId, roomId, agentOf, false).catch((err: unknown) => logger.warn({ err, roomId, characterId: agentOf }, 'voice agent leaving not delivered'));
      };
    },
    onFrame: (data, reply) =>
      handleRoomClientMessage(gateway, logger, { projectId, roomId, send: reply, ...(agentOf !== undefined ? { agentOf } : {}) }, decodeRoomFrame(data)),
  });
}
