import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { Backend } from './env.ts';
import { validateResponseStreamEvent } from './openai/conformance.ts';
import { createCaptainRook, startV1Fixture, type V1Fixture } from './v1.ts';

/** A chat completion request as the fake upstream received it from Troupe. */
export type Sent = {
  model: string;
  messages: { role: string; content: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { function: { name: string; description?: string } }[];
  [k: string]: unknown;
};
export type Event = { type: string; sequence_number: number; [k: string]: unknown };

/** Strictly parses a Responses stream: only `event: <type>\ndata: <json>\n\n` frames, the name matching the data's type. */
export function parseEvents(raw: string): Event[] {
  if (raw !== '' && !raw.endsWith('\n\n')) throw new Error(`stream does not end with a blank line: ${JSON.stringify(raw.slice(-80))}`);
  const frames = raw === '' ? [] : raw.slice(0, -2).split('\n\n');
  return frames.map((frame, i) => {
    const match = /^event: ([a-z_.]+)\ndata: (.*)$/.exec(frame);
    if (!match) throw new Error(`frame ${i} is not an event line and a data line: ${JSON.stringify(frame)}`);
    const event = JSON.parse(match[2] as string) as Event;
    if (event.type !== match[1]) throw new Error(`frame ${i} is named ${match[1]} but carries ${event.type}`);
    return event;
  });
}

/**
 * The /v1/responses suites' setup, registered in the calling describe block: a V1 fixture with
 * one character, Captain Rook, whose capability `wave` becomes a tool, and the upstream's
 * scripts cleared after each test. `f` and `character` are empty until beforeAll fills them in
 * place, so the tests can hold them from the start.
 */
export function useResponsesFixture(backend: Backend) {
  const f = {} as V1Fixture;
  const character = {} as { id: string };

  beforeAll(async () => {
    Object.assign(f, await startV1Fixture(backend));
    Object.assign(character, (await createCaptainRook(f.api)).character);
  });
  afterAll(() => f.close());
  afterEach(() => f.upstream.clearScripts());

  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions');
  function lastChat(): Sent {
    const last = chats().at(-1);
    if (!last) throw new Error('the upstream saw no chat completion');
    expect(last.headers.authorization).toBe('Bearer upstream-secret');
    return last.body as Sent;
  }

  async function post(body: Record<string, unknown>, key = f.key) {
    const res = await fetch(`${f.t.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { res, text: await res.text() };
  }

  /** A streamed response read whole, every event validated against its conformance schema. */
  async function streamEvents(body: Record<string, unknown>): Promise<Event[]> {
    const { res, text } = await post({ ...body, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(text).not.toContain('[DONE]');
    const events = parseEvents(text);
    for (const event of events) validateResponseStreamEvent(event);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    return events;
  }

  return { f, character, chats, lastChat, post, streamEvents };
}
