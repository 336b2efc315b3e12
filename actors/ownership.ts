import { matchMaker } from '@colyseus/core';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * Who runs an actor is its room listing in Colyseus' Redis registry. Two faults break that
 * listing, and this is where Troupe repairs what Colyseus leaves open:
 *
 * - A process dies (SIGKILL, OOM): its listings stay, and calls to its actors would wait for
 *   the reply timeout. Calls to another process watch it with Colyseus' own health check
 *   (an IPC ping, which also sweeps a dead process's listings), so a dead owner is noticed
 *   within `failoverMs` and the actor is made again elsewhere, rebuilt from PostgreSQL.
 * - Redis restarts empty: live owners' listings are gone, and the next message through another
 *   process would make a second actor. Every process that sees Redis come back re-lists its
 *   actors at once (Colyseus' restoreMissingRoomCaches) and marks the moment; no process makes
 *   an actor until `reassertMs` after it, so owners are listed again before anyone may take over.
 */
export class Ownership {
  readonly #redis: Redis | null;
  readonly #logger: Logger;
  readonly #failoverMs: number;
  readonly #reassertMs: number;
  #restoredAt = 0;

  constructor(options: { redis: Redis | null; logger: Logger; failoverMs: number }) {
    this.#redis = options.redis;
    this.#logger = options.logger;
    this.#failoverMs = options.failoverMs;
    // Owners reconnect within a second (see redis-clients.ts) and re-list in milliseconds.
    this.#reassertMs = Math.max(2_000, Math.floor(options.failoverMs / 2));
  }

  /** Redis answered again after an outage: list this process's actors again, first of all. */
  async restored(): Promise<void> {
    if (!this.#redis) return;
    // Marked before any command queued during the outage is answered, so this process's own
    // creates wait too, even before the shared mark below is written.
    this.#restoredAt = Date.now();
    try {
      await this.#redis.set(EPOCH_KEY, String(Date.now()), 'NX');
      await matchMaker.restoreMissingRoomCaches();
      this.#logger.info('actors listed again after the Redis connection came back');
    } catch (err) {
      this.#logger.warn({ err }, 'could not list actors again after Redis came back');
    }
  }

  /** Resolves once actors may be made: never during the grace after Redis came back empty. */
  async mayCreate(): Promise<void> {
    if (!this.#redis) return;
    const shared = Number(await this.#redis.get(EPOCH_KEY));
    const since = Math.max(this.#restoredAt, Number.isFinite(shared) ? shared : 0);
    const wait = since + this.#reassertMs - Date.now();
    if (Number.isFinite(wait) && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /**
   * `call` to an actor on `processId`, failed with `gone()` as soon as that process stops
   * answering health checks (its listings are then swept); otherwise whatever `call` gives.
   */
  watch<T>(processId: string, call: Promise<T>, gone: () => Error): Promise<T> {
    if (!this.#redis || processId === matchMaker.processId) return call;
    let timer: NodeJS.Timeout | undefined;
    let checking = false;
    const ownerGone = new Promise<never>((_, reject) => {
      timer = setInterval(() => {
        if (checking) return;
        checking = true;
        matchMaker.healthCheckProcessId(processId).then(
          (alive) => {
            checking = false;
            if (alive) return;
            this.#logger.warn({ processId }, 'the process running an actor stopped answering; taking its actors over');
            reject(gone());
          },
          () => (checking = false),
        );
      }, Math.max(250, Math.floor(this.#failoverMs / 3)));
    });
    ownerGone.catch(() => {});
    return Promise.race([call, ownerGone]).finally(() => clearInterval(timer));
  }
}

/** When Redis was last seen coming back (ms since the epoch); absent on a Redis never lost. */
const EPOCH_KEY = 'troupe:registry-restored-at';
