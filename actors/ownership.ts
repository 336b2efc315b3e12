import { matchMaker } from '@colyseus/core';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * Who runs an actor is its room listing in Colyseus' Redis registry; the listing is the lease,
 * and it holds only while its process's heartbeat does. Colyseus gives the listing, the IPC
 * health check with its sweep of a dead process's listings, and `restoreMissingRoomCaches`;
 * Troupe adds the heartbeat, the grace after Redis comes back, and (in PostgreSQL) the owner
 * epoch that fences writes made under a lost lease (see `claimConversation`).
 *
 * - A process dies (SIGKILL, OOM): its heartbeat key expires within `heartbeatTtlMs`, and calls
 *   waiting on its actors notice it, sweep its listings and make the actors again elsewhere,
 *   rebuilt from PostgreSQL, so a dead owner is replaced within `failoverMs`.
 * - Redis restarts empty: live owners' listings (and heartbeats) are gone, and the next message
 *   through another process would make a second actor. Every process that sees Redis come back
 *   re-lists its actors at once (Colyseus' restoreMissingRoomCaches) and marks the moment; no
 *   process makes an actor, or trusts a missing heartbeat, until `reassertMs` after it.
 */
export class Ownership {
  readonly #redis: Redis | null;
  readonly #logger: Logger;
  readonly #failoverMs: number;
  readonly #reassertMs: number;
  readonly #heartbeatTtlMs: number;
  #restoredAt = 0;
  #beat: NodeJS.Timeout | null = null;

  constructor(options: { redis: Redis | null; logger: Logger; failoverMs: number }) {
    this.#redis = options.redis;
    this.#logger = options.logger;
    this.#failoverMs = options.failoverMs;
    // Owners reconnect within a second (see redis-clients.ts) and re-list in milliseconds.
    this.#reassertMs = Math.max(2_000, Math.floor(options.failoverMs / 2));
    // Half the failover budget: the rest covers noticing the expiry and rebuilding the actor.
    this.#heartbeatTtlMs = Math.max(500, Math.floor(options.failoverMs / 2));
  }

  /** Keeps this process's heartbeat alive (renewed well within its TTL) until `stop`. */
  async start(): Promise<void> {
    const redis = this.#redis;
    if (!redis || this.#beat) return;
    const key = heartbeatKey(matchMaker.processId);
    const renew = () => redis.set(key, String(Date.now()), 'PX', this.#heartbeatTtlMs);
    await renew();
    this.#beat = setInterval(() => {
      renew().catch(() => {}); // Redis is down: the connection logs it, the next beat retries
    }, Math.max(100, Math.floor(this.#heartbeatTtlMs / 4)));
    this.#beat.unref();
  }

  /** Ends the heartbeat: the process is stopping and its actors have been unlisted. */
  async stop(): Promise<void> {
    if (!this.#beat || !this.#redis) return;
    clearInterval(this.#beat);
    this.#beat = null;
    await this.#redis.del(heartbeatKey(matchMaker.processId)).catch(() => {});
  }

  /** Redis answered again after an outage: list this process's actors again, first of all. */
  async restored(): Promise<void> {
    if (!this.#redis) return;
    // Marked before any command queued during the outage is answered, so this process's own
    // creates wait too, even before the shared mark below is written.
    this.#restoredAt = Date.now();
    try {
      await this.#redis.set(EPOCH_KEY, String(Date.now()), 'NX');
      if (this.#beat) await this.#redis.set(heartbeatKey(matchMaker.processId), String(Date.now()), 'PX', this.#heartbeatTtlMs);
      await matchMaker.restoreMissingRoomCaches();
      this.#logger.info('actors listed again after the Redis connection came back');
    } catch (err) {
      this.#logger.warn({ err }, 'could not list actors again after Redis came back');
    }
  }

  /** Resolves once actors may be made: never during the grace after Redis came back empty. */
  async mayCreate(): Promise<void> {
    const wait = (await this.#lastRestore()) + this.#reassertMs - Date.now();
    if (Number.isFinite(wait) && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /**
   * Whether `processId` still runs. Its heartbeat answers at once; a missing one is trusted
   * only outside the grace after a Redis restart (which loses every heartbeat for a moment),
   * and then its listings are swept so its actors are made again.
   */
  async alive(processId: string): Promise<boolean> {
    const redis = this.#redis;
    if (!redis || processId === matchMaker.processId) return true;
    if ((await redis.exists(heartbeatKey(processId))) === 1) return true;
    // Just after Redis came back empty, every heartbeat is missing until its owner renews it:
    // not evidence of death. (Colyseus' IPC health check is no better then: its answer can be
    // lost while the owner's subscriber reconnects, and it would sweep a live owner's actors.)
    if (Date.now() - (await this.#lastRestore()) < this.#reassertMs + this.#heartbeatTtlMs) return true;
    await matchMaker.driver.cleanup?.(processId);
    return false;
  }

  async #lastRestore(): Promise<number> {
    if (!this.#redis) return 0;
    const shared = Number(await this.#redis.get(EPOCH_KEY));
    return Math.max(this.#restoredAt, Number.isFinite(shared) ? shared : 0);
  }

  /**
   * `call` to an actor on `processId`, failed with `gone()` as soon as that process is found
   * dead (its heartbeat expired; its listings are then swept); otherwise whatever `call` gives.
   */
  watch<T>(processId: string, call: Promise<T>, gone: () => Error): Promise<T> {
    if (!this.#redis || processId === matchMaker.processId) return call;
    let timer: NodeJS.Timeout | undefined;
    let checking = false;
    const ownerGone = new Promise<never>((_, reject) => {
      timer = setInterval(() => {
        if (checking) return;
        checking = true;
        this.alive(processId).then(
          (alive) => {
            checking = false;
            if (alive) return;
            this.#logger.warn({ processId }, 'the process running an actor stopped its heartbeat; taking its actors over');
            reject(gone());
          },
          () => (checking = false),
        );
      }, Math.max(100, Math.floor(this.#failoverMs / 10)));
    });
    ownerGone.catch(() => {});
    return Promise.race([call, ownerGone]).finally(() => clearInterval(timer));
  }
}

const heartbeatKey = (processId: string) => `troupe:process-alive:${processId}`;

/** When Redis was last seen coming back (ms since the epoch); absent on a Redis never lost. */
const EPOCH_KEY = 'troupe:registry-restored-at';
