import { describe, expect, it } from 'vitest';
import { createActor, SimulatedClock } from 'xstate';
import { conversationLifecycle } from '../../machines/conversation-lifecycle.ts';

/** The machine on a simulated clock, counting how often it asked for disposal. */
function start(idleMs = 1000) {
  const clock = new SimulatedClock();
  let disposals = 0;
  const machine = conversationLifecycle.provide({ actions: { dispose: () => void disposals++ } });
  const actor = createActor(machine, { input: { idleMs }, clock }).start();
  return { actor, clock, disposals: () => disposals, state: () => actor.getSnapshot().value };
}

describe('conversation actor lifecycle', () => {
  it('disposes an actor left idle for idleMs, and not before', () => {
    const m = start(1000);
    expect(m.state()).toBe('idle');
    m.clock.increment(999);
    expect(m.disposals()).toBe(0);
    m.clock.increment(1);
    expect(m.state()).toBe('disposed');
    expect(m.disposals()).toBe(1);
    expect(m.actor.getSnapshot().status).toBe('done');
  });

  it('stays busy while work runs or game clients are joined, and idles only when both are gone', () => {
    const m = start(1000);
    m.actor.send({ type: 'work.started' });
    m.actor.send({ type: 'client.joined' });
    m.clock.increment(5000);
    expect(m.state()).toBe('busy');
    m.actor.send({ type: 'work.finished' });
    m.clock.increment(5000);
    expect(m.state()).toBe('busy');
    m.actor.send({ type: 'client.left' });
    expect(m.state()).toBe('idle');
    m.clock.increment(1000);
    expect(m.disposals()).toBe(1);
  });

  it('restarts the idle timer whenever work comes and goes', () => {
    const m = start(1000);
    m.clock.increment(900);
    m.actor.send({ type: 'work.started' });
    m.actor.send({ type: 'work.finished' });
    m.clock.increment(900);
    expect(m.state()).toBe('idle');
    m.clock.increment(100);
    expect(m.disposals()).toBe(1);
  });

  it('counts overlapping work and never goes below zero', () => {
    const m = start(1000);
    m.actor.send({ type: 'work.started' });
    m.actor.send({ type: 'work.started' });
    m.actor.send({ type: 'work.finished' });
    expect(m.state()).toBe('busy');
    m.actor.send({ type: 'work.finished' });
    m.actor.send({ type: 'work.finished' });
    expect(m.state()).toBe('idle');
    expect(m.actor.getSnapshot().context.work).toBe(0);
  });

  it('disposes at once on shutdown, even while busy, and only once', () => {
    const m = start(1000);
    m.actor.send({ type: 'work.started' });
    m.actor.send({ type: 'shutdown' });
    expect(m.state()).toBe('disposed');
    m.actor.send({ type: 'shutdown' });
    m.clock.increment(10_000);
    expect(m.disposals()).toBe(1);
  });
});
