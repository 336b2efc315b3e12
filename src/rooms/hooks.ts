import type { RoomGateway } from './gateway.ts';
import type { RoomHooks } from './service.ts';

/** The room's actor hears of every membership change and the end, from whichever process made it. */
export function roomActorHooks(gateway: () => RoomGateway): RoomHooks {
  return {
    participantAdded: (room) => gateway().changed(room.projectId, room.id, { kind: 'participants' }),
    participantRemoved: (room) => gateway().changed(room.projectId, room.id, { kind: 'participants' }),
    ended: (room) => gateway().changed(room.projectId, room.id, { kind: 'ended', endedAt: room.endedAt ?? new Date().toISOString() }),
  };
}

/** Several hook sets as one: each hook runs them in order. */
export function allHooks(...sets: RoomHooks[]): RoomHooks {
  const names = ['participantAdded', 'participantLeaving', 'participantRemoved', 'ending', 'ended'] as const;
  const combined: RoomHooks = {};
  for (const name of names) {
    const each = sets.map((set) => set[name]).filter((hook) => hook !== undefined);
    if (each.length === 0) continue;
    combined[name] = async (room, participants: never) => {
      for (const hook of each) await (hook as (r: typeof room, p: never) => Promise<void>)(room, participants);
    };
  }
  return combined;
}
