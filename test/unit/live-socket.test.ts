import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { liveSocket } from '../../src/http/live-socket.ts';

describe('a live socket', () => {
  it('sends ready first, then the events that arrived while its subscription was resolving, then the rest', async () => {
    let emit!: (event: { type: string; n: number }) => void;
    let resolve!: (stop: () => void) => void;
    const handler = liveSocket<{ type: string; n: number }>({
      logger: pino({ level: 'silent' }),
      what: 'conversation',
      subscribe: (listener) => {
        emit = listener;
        return new Promise((r) => (resolve = r));
      },
      onFrame: () => {},
    });
    const sent: unknown[] = [];
    handler.onOpen({ send: (text) => sent.push(JSON.parse(text)) > 0, close: () => {}, bufferedAmount: 0 });
    // Live already (as a Redis subscription is before its promise settles): an event comes in.
    emit({ type: 'chunk', n: 1 });
    expect(sent).toEqual([]);
    resolve(() => {});
    await new Promise((r) => setImmediate(r));
    emit({ type: 'chunk', n: 2 });
    expect(sent).toEqual([{ type: 'ready' }, { type: 'chunk', n: 1 }, { type: 'chunk', n: 2 }]);
  });
});
