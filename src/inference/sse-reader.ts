// Server-sent events of a chat-completion stream, read straight off the response's bytes: lines
// are split as they arrive and each event's JSON handed on in the same read (see openai-http.ts
// for why the SDK's decoder is not used on this path).
import type { IncomingMessage } from 'node:http';

/** The stream itself reported an error (an `error` event or object after the 200). */
export class UpstreamStreamError extends Error {
  override name = 'UpstreamStreamError';
}

/**
 * The JSON payloads of an SSE reply, in order, until `[DONE]` or the end of the body. An `error`
 * event, or a payload that is an error object, throws UpstreamStreamError. Event driven, so a
 * promise is made only when the reader waits; and the body is read to its end even after
 * `[DONE]`, because destroying it early would close the keep-alive connection.
 */
export function sseJson(res: IncomingMessage): SseReader {
  return new SseReader(res);
}

/**
 * A batch handler of `SseReader.pump`: true when written, false when the client left, or a
 * promise of either while the client's socket drains.
 */
export type BatchWritten = boolean | Promise<boolean>;

interface Pump {
  deliver: (payload: Record<string, unknown>) => void;
  flush: () => BatchWritten;
  resolve: (complete: boolean) => void;
  reject: (err: unknown) => void;
  /** A flush is waiting for the client's socket (the response is paused meanwhile). */
  draining: boolean;
}

/**
 * Read one at a time (`next`), or pushed as they arrive (`pump`): the hot path, which parses and
 * hands each payload on within the socket's own read, with no promise per event.
 */
export class SseReader implements AsyncIterableIterator<Record<string, unknown>> {
  readonly #res: IncomingMessage;
  readonly #ready: Record<string, unknown>[] = [];
  #head = 0;
  #failure: unknown = null;
  #ended = false;
  #done = false;
  #wake: (() => void) | null = null;
  #pump: Pump | null = null;
  #pending = '';
  #data: string | null = null;
  #event = '';

  constructor(res: IncomingMessage) {
    this.#res = res;
    res.setEncoding('utf8');
    res.on('data', (piece: string) => this.#accept(piece));
    res.once('end', () => this.#finish(null));
    res.once('error', (err) => this.#finish(err));
    res.once('close', () => this.#finish(res.complete ? null : new UpstreamStreamError('The inference server closed the stream before it ended.')));
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Record<string, unknown>> {
    return this;
  }

  async next(): Promise<IteratorResult<Record<string, unknown>>> {
    for (;;) {
      if (this.#head < this.#ready.length) {
        const value = this.#ready[this.#head++] as Record<string, unknown>;
        if (this.#head === this.#ready.length) {
          this.#ready.length = 0;
          this.#head = 0;
        }
        return { value, done: false };
      }
      if (this.#failure !== null) throw this.#failure;
      if (this.#done || this.#ended) return { value: undefined, done: true };
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  /**
   * Hands every payload not yet read to `deliver` as it is parsed, and calls `flush` after each
   * arrival's payloads (one write per arrival). While a flush waits for the client's socket the
   * response is paused, so a slow client slows the inference server instead of filling memory.
   * Resolves true at `[DONE]` or the end, leaving the last arrival's payloads for the caller to
   * write with its own ending; false once `flush` answered false (the client left). Rejects
   * with the stream's failure after flushing what came before it.
   */
  pump(deliver: (payload: Record<string, unknown>) => void, flush: () => BatchWritten): Promise<boolean> {
    const { promise, resolve, reject } = Promise.withResolvers<boolean>();
    this.#pump = { deliver, flush, resolve, reject, draining: false };
    const waiting = this.#ready.splice(0).slice(this.#head);
    this.#head = 0;
    try {
      for (const payload of waiting) deliver(payload);
    } catch (err) {
      if (this.#failure === null) this.#failure = err;
    }
    this.#pushed();
    return promise;
  }

  /** Stops early (the consumer gave up): the connection cannot be reused then. */
  async return(): Promise<IteratorResult<Record<string, unknown>>> {
    if (!this.#ended) this.#res.destroy();
    this.#ended = true;
    return { value: undefined, done: true };
  }

  #accept(piece: string): void {
    if (this.#done || this.#failure !== null) return; // past [DONE]: read to the end, keep nothing
    const text = this.#pending === '' ? piece : this.#pending + piece;
    let start = 0;
    try {
      for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
        const line = text.charCodeAt(end - 1) === 13 ? text.slice(start, end - 1) : text.slice(start, end);
        start = end + 1;
        this.#line(line);
        if (this.#done) break;
      }
    } catch (err) {
      this.#failure = err;
    }
    this.#pending = start === 0 ? text : text.slice(start);
    this.#signal();
  }

  #line(line: string): void {
    if (line === '') {
      // A blank line ends the event.
      const data = this.#data;
      if (data === null) return;
      this.#data = null;
      if (data === '[DONE]') {
        this.#done = true;
        return;
      }
      const payload = parseEventData(data, this.#event);
      this.#event = '';
      this.#parsed(payload);
    } else if (line.startsWith('data:')) {
      const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
      this.#data = this.#data === null ? value : `${this.#data}\n${value}`;
    } else if (line.startsWith('event:')) {
      this.#event = line.slice(6).trim();
    }
    // Comments (`:`), ids and retry fields carry nothing a completion needs.
  }

  #finish(err: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    if (err !== null && !this.#done && this.#failure === null) this.#failure = err;
    // A last event without its blank line (or its newline) still counts.
    if (this.#failure === null && !this.#done && this.#pending !== '') {
      try {
        this.#line(this.#pending);
      } catch (lineErr) {
        this.#failure = lineErr;
      }
    }
    if (this.#failure === null && !this.#done && this.#data !== null && this.#data !== '[DONE]') {
      try {
        this.#parsed(parseEventData(this.#data, this.#event));
      } catch (parseErr) {
        this.#failure = parseErr;
      }
    }
    this.#signal();
  }

  /** A payload goes to the pump when there is one, else waits for `next`. */
  #parsed(payload: Record<string, unknown>): void {
    if (this.#pump) this.#pump.deliver(payload);
    else this.#ready.push(payload);
  }

  #signal(): void {
    if (this.#pump !== null) return this.#pushed();
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** In pump mode, after an arrival or the end: flush, pause while the client drains, settle at the end. */
  #pushed(): void {
    const pump = this.#pump;
    if (pump === null || pump.draining) return;
    if (this.#failure !== null) {
      this.#pump = null;
      // What arrived before the failure still goes out; the caller then reports the failure.
      void pump.flush();
      pump.reject(this.#failure);
      return;
    }
    if (this.#done || this.#ended) {
      this.#pump = null;
      pump.resolve(true);
      return;
    }
    const sent = pump.flush();
    if (sent === true) return;
    if (sent === false) return this.#stopPump(pump);
    pump.draining = true;
    this.#res.pause();
    sent.then(
      (ok) => {
        pump.draining = false;
        if (!ok) return this.#stopPump(pump);
        this.#res.resume();
        // The end or a failure may have come while paused.
        this.#pushed();
      },
      (err: unknown) => {
        this.#pump = null;
        pump.reject(err);
      },
    );
  }

  /** The client left: keep nothing more (the caller cancels the request). */
  #stopPump(pump: Pump): void {
    this.#pump = null;
    this.#done = true;
    pump.resolve(false);
  }
}

function parseEventData(data: string, event: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    throw new UpstreamStreamError(`The inference server streamed something that is not JSON: ${data.slice(0, 200)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UpstreamStreamError('The inference server streamed a value that is not an object.');
  const record = parsed as Record<string, unknown>;
  if (event === 'error' || record.error !== undefined) {
    const error = record.error as { message?: unknown } | undefined;
    throw new UpstreamStreamError(typeof error?.message === 'string' ? error.message : `The inference server reported an error: ${data.slice(0, 200)}`);
  }
  return record;
}
