import { assign, setup } from 'xstate';

/**
 * The life of one conversation actor (a Colyseus room). It is `busy` while it has work or
 * connected game clients, `idle` otherwise, and is disposed after `idleMs` in `idle`: the next
 * message rebuilds it from PostgreSQL. `shutdown` (the process stopping) disposes it at once.
 *
 *   idle --work.started / client.joined--> busy --(no work, no clients)--> idle
 *   idle --after idleMs--> disposed;  any --shutdown--> disposed
 */
export interface LifecycleContext {
  work: number;
  clients: number;
  idleMs: number;
}

export type LifecycleEvent =
  | { type: 'work.started' }
  | { type: 'work.finished' }
  | { type: 'client.joined' }
  | { type: 'client.left' }
  | { type: 'shutdown' };

export const conversationLifecycle = setup({
  types: {
    context: {} as LifecycleContext,
    events: {} as LifecycleEvent,
    input: {} as { idleMs: number },
  },
  delays: {
    idleTimeout: ({ context }) => context.idleMs,
  },
  guards: {
    unused: ({ context }) => context.work === 0 && context.clients === 0,
  },
  actions: {
    /** Provided by the room: lock it and let Colyseus dispose of it. */
    dispose: () => {},
  },
}).createMachine({
  id: 'conversationLifecycle',
  initial: 'idle',
  context: ({ input }) => ({ work: 0, clients: 0, idleMs: input.idleMs }),
  on: {
    'work.started': { target: '.busy', actions: assign({ work: ({ context }) => context.work + 1 }) },
    'work.finished': { target: '.busy', actions: assign({ work: ({ context }) => Math.max(0, context.work - 1) }) },
    'client.joined': { target: '.busy', actions: assign({ clients: ({ context }) => context.clients + 1 }) },
    'client.left': { target: '.busy', actions: assign({ clients: ({ context }) => Math.max(0, context.clients - 1) }) },
    shutdown: { target: '.disposed' },
  },
  states: {
    idle: {
      after: { idleTimeout: { target: 'disposed' } },
    },
    busy: {
      always: { guard: 'unused', target: 'idle' },
    },
    disposed: {
      type: 'final',
      entry: 'dispose',
      // A final state ignores the root's transitions: nothing revives a disposed actor.
    },
  },
});
