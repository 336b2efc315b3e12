import { describe, expect, it } from 'vitest';
import { createActor, SimulatedClock } from 'xstate';
import { roomLifecycle, roomStatus, type RoomStatus } from '../../machines/room-lifecycle.ts';

function start(status: RoomStatus, idleMs = 1_000) {
  const clock = new SimulatedClock();
  const calls = { dispose: 0, announce: 0 };
  const machine = roomLifecycle.provide({ actions: { dispose: () => void calls.dispose++, announce: () => void calls.announce++ } });
  const actor = createActor(machine, { input: { idleMs, status }, clock }).start();
  return { actor, clock, calls, status: () => roomStatus(actor.getSnapshot().value) };
}

describe('room lifecycle machine', () => {
  it('goes created -> live -> ended on start and end, announcing each change', () => {
    const { actor, calls, status } = start('created');
    expect(status()).toBe('created');
    actor.send({ type: 'start' });
    expect(status()).toBe('live');
    actor.send({ type: 'start' }); // a second start changes nothing
    expect(calls.announce).toBe(1);
    actor.send({ type: 'end' });
    expect(status()).toBe('ended');
    actor.send({ type: 'start' }); // an ended room stays ended
    expect(status()).toBe('ended');
    expect(calls.announce).toBe(2);
  });

  it('can end a room that never started', () => {
    const { actor, status } = start('created');
    actor.send({ type: 'end' });
    expect(status()).toBe('ended');
  });

  it('restores the status kept in the database', () => {
    expect(start('live').status()).toBe('live');
    expect(start('ended').status()).toBe('ended');
  });

  it('is disposed after idleMs without work or clients, and not while it has either', () => {
    const { actor, clock, calls } = start('live', 1_000);
    actor.send({ type: 'work.started' });
    actor.send({ type: 'client.joined' });
    clock.increment(5_000);
    expect(calls.dispose).toBe(0);
    actor.send({ type: 'work.finished' });
    clock.increment(5_000);
    expect(calls.dispose).toBe(0); // a game client is still joined
    actor.send({ type: 'client.left' });
    clock.increment(999);
    expect(calls.dispose).toBe(0);
    clock.increment(1);
    expect(calls.dispose).toBe(1);
  });

  it('is disposed at once on shutdown, whatever it is doing', () => {
    const { actor, calls } = start('created');
    actor.send({ type: 'work.started' });
    actor.send({ type: 'shutdown' });
    expect(calls.dispose).toBe(1);
    actor.send({ type: 'work.finished' });
    expect(calls.dispose).toBe(1);
  });
});
