import type { Room, RoomException, RoomMethodName } from '@colyseus/core';
import type { ClientResult } from '../src/capabilities/executor.ts';
import { failure, type Envelope } from './envelope.ts';

export interface ActorWorkOptions {
  /** Work was queued / finished: the actor's lifecycle machine counts it. */
  started(): void;
  finished(): void;
  /** A failure of `work`, as the caller gets it; undefined to give the usual failure. */
  failed(err: unknown): Envelope<never> | undefined;
}

/**
 * An actor's one queue: work runs strictly one at a time, in the order it was queued, and the
 * actor stays alive until its queue is empty. Once `drained`, it refuses work with `retry`
 * (the caller makes the actor again and sends it there).
 */
export class ActorWork {
  readonly #options: ActorWorkOptions;
  #queue: Promise<unknown> = Promise.resolve();
  #closing = false;

  constructor(options: ActorWorkOptions) {
    this.#options = options;
  }

  get closing(): boolean {
    return this.#closing;
  }

  /** No more work from now on (the actor is being disposed). */
  close(): void {
    this.#closing = true;
  }

  /** Runs `work` after everything queued before it. */
  enqueue<T>(work: () => Promise<T>): Promise<Envelope<T>> {
    if (this.#closing) return Promise.resolve({ ok: false, retry: true });
    this.#options.started();
    const run = async (): Promise<Envelope<T>> => {
      try {
        return { ok: true, value: await work() };
      } catch (err) {
        return this.#options.failed(err) ?? failure(err);
      } finally {
        this.#options.finished();
      }
    };
    const result = this.#queue.then(run, run);
    this.#queue = result;
    return result;
  }

  /** Resolves once the queue is empty, refusing new work from that moment on. */
  async drained(): Promise<void> {
    for (;;) {
      const queue = this.#queue;
      await queue;
      if (queue === this.#queue) {
        this.#closing = true;
        return;
      }
    }
  }
}

/**
 * client_function_call results an actor waits for, by call id, on the actor's clock (so the
 * timeouts run inside its error boundary).
 */
export class PendingResults {
  readonly #clock: Room['clock'];
  readonly #pending = new Map<string, (result: ClientResult) => void>();

  constructor(clock: Room['clock']) {
    this.#clock = clock;
  }

  wait(callId: string, timeoutMs: number, signal: AbortSignal): Promise<ClientResult> {
    return new Promise((resolve) => {
      const finish = (result: ClientResult) => {
        timer.clear();
        signal.removeEventListener('abort', onAbort);
        this.#pending.delete(callId);
        resolve(result);
      };
      const onAbort = () => finish({ received: false });
      const timer = this.#clock.setTimeout(() => finish({ received: false }), timeoutMs);
      signal.addEventListener('abort', onAbort);
      this.#pending.set(callId, finish);
    });
  }

  /** A client's answer; false when nothing waits for `callId`. */
  answer(callId: string, result: unknown): boolean {
    const finish = this.#pending.get(callId);
    if (!finish) return false;
    finish({ received: true, result });
    return true;
  }

  /** The actor is going: every wait ends without a result. */
  cancelAll(): void {
    for (const finish of this.#pending.values()) finish({ received: false });
  }
}

/**
 * Disposes `room` once `work` is drained: work under way, and work that reaches the actor
 * meanwhile, finishes first; the actor stays listed (other processes keep sending to it, in
 * order) until its queue is empty, and only then is unlisted, so no second actor starts
 * mid-reply. Failures go to `failed`.
 */
export function disposeWhenDrained(room: Room, work: ActorWork, failed: (err: unknown) => void): Promise<void> {
  return work
    .drained()
    .then(() => room.lock())
    .then(() => room.disconnect())
    .then(() => undefined, failed);
}

/** Runs `fn` inside `room`'s error boundary, for callbacks Colyseus does not wrap itself. */
export function guarded(room: Room, method: RoomMethodName, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    room.onUncaughtException?.(err as RoomException, method);
  }
}
