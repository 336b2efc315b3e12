import { assign, setup } from 'xstate';

/**
 * The life of one room actor (a Colyseus room), in two parallel parts:
 *
 * - `status`, the room's own state, kept in PostgreSQL and restored from it:
 *     created --start--> live;  created | live --end--> ended (final: an ended room stays ended)
 * - `activity`, whether the actor is needed in memory: `busy` while it has work or joined game
 *   clients, `idle` otherwise, disposed after `idleMs` idle (the next use rebuilds it from
 *   PostgreSQL) or at once on `shutdown` (the process stopping, or the room ended).
 */
export type RoomStatus = 'created' | 'live' | 'ended';

export interface RoomLifecycleContext {
  work: number;
  clients: number;
  idleMs: number;
  restored: RoomStatus;
}

export type RoomLifecycleEvent =
  | { type: 'start' }
  | { type: 'end' }
  | { type: 'work.started' }
  | { type: 'work.finished' }
  | { type: 'client.joined' }
  | { type: 'client.left' }
  | { type: 'shutdown' };

export const roomLifecycle = setup({
  types: {
    context: {} as RoomLifecycleContext,
    events: {} as RoomLifecycleEvent,
    input: {} as { idleMs: number; status: RoomStatus },
  },
  delays: {
    idleTimeout: ({ context }) => context.idleMs,
  },
  guards: {
    unused: ({ context }) => context.work === 0 && context.clients === 0,
    wasLive: ({ context }) => context.restored === 'live',
    wasEnded: ({ context }) => context.restored === 'ended',
  },
  actions: {
    /** Provided by the room: drain, unlist and let Colyseus dispose of it. */
    dispose: () => {},
    /** Provided by the room: tell listeners the status changed. */
    announce: () => {},
  },
}).createMachine({
  id: 'roomLifecycle',
  type: 'parallel',
  context: ({ input }) => ({ work: 0, clients: 0, idleMs: input.idleMs, restored: input.status }),
  states: {
    status: {
      initial: 'restoring',
      states: {
        restoring: {
          always: [{ guard: 'wasEnded', target: 'ended' }, { guard: 'wasLive', target: 'live' }, { target: 'created' }],
        },
        created: { on: { start: { target: 'live', actions: 'announce' }, end: { target: 'ended', actions: 'announce' } } },
        live: { on: { end: { target: 'ended', actions: 'announce' } } },
        ended: { type: 'final' },
      },
    },
    activity: {
      initial: 'idle',
      on: {
        'work.started': { target: '.busy', actions: assign({ work: ({ context }) => context.work + 1 }) },
        'work.finished': { target: '.busy', actions: assign({ work: ({ context }) => Math.max(0, context.work - 1) }) },
        'client.joined': { target: '.busy', actions: assign({ clients: ({ context }) => context.clients + 1 }) },
        'client.left': { target: '.busy', actions: assign({ clients: ({ context }) => Math.max(0, context.clients - 1) }) },
        shutdown: { target: '.disposed' },
      },
      states: {
        idle: { after: { idleTimeout: { target: 'disposed' } } },
        busy: { always: { guard: 'unused', target: 'idle' } },
        disposed: { type: 'final', entry: 'dispose' },
      },
    },
  },
});

/** The room status a lifecycle snapshot is in. */
export function roomStatus(value: unknown): RoomStatus {
  const status = (value as { status?: string }).status;
  return status === 'live' || status === 'ended' ? status : 'created';
}
