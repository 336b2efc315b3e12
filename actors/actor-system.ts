import { LocalDriver, LocalPresence, matchMaker, type Presence, type Room } from '@colyseus/core';
import { RedisDriver } from '@colyseus/redis-driver';
import { RedisPresence } from '@colyseus/redis-presence';
import { setLogger } from '@colyseus/core/Logger';
import type { Logger } from 'pino';
import { TroupeError } from '../src/errors.ts';
import { Ownership } from './ownership.ts';
import { colyseusLogger, redisClient } from './redis-clients.ts';

type MatchMakerDriver = matchMaker.MatchMakerDriver;

/** A room found by `find` or `ensureRoom`: which process runs it. */
export interface RoomRef {
  roomId: string;
  processId: string;
}

/** The room was disposed between finding it and calling it; make it again and retry. */
export class RoomGone extends Error {
  override name = 'RoomGone';
  constructor(roomId: string) {
    super(`room ${roomId} is gone`);
  }
}

export interface ActorSystemOptions {
  /** Shared presence and room registry for several processes; in-process when absent. */
  redisUrl: string | undefined;
  logger: Logger;
  /** How long one Redis command may take before it fails (503 redis_unavailable). */
  redisCommandTimeoutMs?: number;
  /** How soon an actor whose process died is made again elsewhere. */
  failoverMs?: number;
}

type RoomClass = new () => Room;

/** How long the owner of a room has to answer for it before a long call is sent. */
const ACK_TIMEOUT_MS = 2_000;
const ACK_ATTEMPTS = 2;
type ArgsOf<F> = F extends (...args: infer A) => unknown ? A : never;
type ResultOf<F> = F extends (...args: never[]) => infer R ? R : never;

/** Calls a method of an actor of kind `M` (its name and arguments checked), wherever it runs. */
export type ActorCaller<M> = <K extends keyof M & string>(room: RoomRef, method: K, args: ArgsOf<M[K]>, timeoutMs: number) => Promise<Awaited<ResultOf<M[K]>>>;

/**
 * The process's actor runtime: Colyseus' matchmaker, its presence (pub/sub) and its room
 * registry, in memory or on Redis. Colyseus keeps these in module state, so a process has one;
 * every server started in the process (tests start several) shares it and registers its own
 * room types. The last one to leave shuts it down.
 */
export class ActorSystem {
  readonly presence: Presence;
  readonly #driver: MatchMakerDriver;
  readonly #options: ActorSystemOptions;
  readonly #creating = new Map<string, Promise<RoomRef>>();
  readonly #ownership: Ownership;
  readonly #pendingRemote = new Set<() => void>();
  #users = 0;
  #roomTypes = 0;

  private constructor(options: ActorSystemOptions, presence: Presence, driver: MatchMakerDriver, ownership: Ownership) {
    this.#options = options;
    this.presence = presence;
    this.#driver = driver;
    this.#ownership = ownership;
    this.#failPendingOnLoss();
  }

  static #current: Promise<ActorSystem> | null = null;

  /** The process's actor system, started on first use. */
  static async acquire(options: ActorSystemOptions): Promise<ActorSystem> {
    ActorSystem.#current ??= ActorSystem.#start(options).catch((err: unknown) => {
      ActorSystem.#current = null;
      throw err;
    });
    const system = await ActorSystem.#current;
    if (system.#options.redisUrl !== options.redisUrl) {
      throw new Error('One process runs one actor system: every server in it must use the same REDIS_URL.');
    }
    system.#users++;
    return system;
  }

  static async #start(options: ActorSystemOptions): Promise<ActorSystem> {
    setLogger(colyseusLogger(options.logger));
    const timeout = options.redisCommandTimeoutMs ?? 2_000;
    const { redisUrl, logger } = options;
    const presence: Presence = redisUrl ? new RedisPresence(redisClient(redisUrl, logger, 'presence', timeout)) : new LocalPresence();
    const registry = redisUrl ? redisClient(redisUrl, logger, 'registry', timeout, () => void ownership.restored()) : null;
    const ownership = new Ownership({ redis: registry, logger, failoverMs: options.failoverMs ?? 5_000 });
    const driver: MatchMakerDriver = registry ? new RedisDriver(registry) : new LocalDriver();
    // A conversation's actor lives where it is first needed: no extra hop for the common case
    // of a conversation served by one process, and no remote create that can time out.
    await matchMaker.setup(presence, driver, undefined, () => Promise.resolve(matchMaker.processId));
    matchMaker.controller.exposedMethods = ['joinById', 'reconnect'];
    await matchMaker.accept();
    await ownership.start();
    options.logger.info({ processId: matchMaker.processId, redis: Boolean(options.redisUrl) }, 'actor system ready');
    return new ActorSystem(options, presence, driver, ownership);
  }

  /** Registers a room type under a name unique in this process, and returns the name. */
  define(baseName: string, klass: RoomClass): string {
    const name = this.#roomTypes++ === 0 ? baseName : `${baseName}-${this.#roomTypes}`;
    matchMaker.defineRoomType(name, klass);
    return name;
  }

  /**
   * Makes sure the room `roomId` exists somewhere, creating it here if not. Concurrent callers
   * in this process share one attempt; across processes a short Redis lock makes one of them
   * create it (Colyseus' Redis driver has no atomic insert, so two creates would both succeed).
   */
  async ensureRoom(roomName: string, roomId: string, options: Record<string, unknown>): Promise<RoomRef> {
    const found = await this.find(roomId);
    if (found) return found;
    let attempt = this.#creating.get(roomId);
    if (!attempt) {
      attempt = this.#create(roomName, roomId, options).finally(() => this.#creating.delete(roomId));
      this.#creating.set(roomId, attempt);
    }
    return attempt;
  }

  /** Where the room runs, if anywhere: no I/O when it runs here. */
  async find(roomId: string): Promise<RoomRef | undefined> {
    if (matchMaker.getLocalRoomById(roomId)) return { roomId, processId: matchMaker.processId };
    const listing = await matchMaker.getRoomById(roomId);
    return listing ? { roomId, processId: listing.processId } : undefined;
  }

  async #create(roomName: string, roomId: string, options: Record<string, unknown>): Promise<RoomRef> {
    const lock = `troupe:creating-room:${roomId}`;
    for (let attempt = 0; attempt < 100; attempt++) {
      const found = await this.find(roomId);
      if (found) return found;
      if ((await this.presence.hincrbyex(lock, 'n', 1, 10)) === 1) {
        try {
          await this.#ownership.mayCreate();
          const raced = await this.find(roomId);
          if (raced) return raced;
          const listing = await matchMaker.createRoom(roomName, options);
          return { roomId, processId: listing.processId };
        } finally {
          this.presence.del(lock);
        }
      }
      // Another process is creating it: look again shortly.
      await new Promise((resolve) => setTimeout(resolve, Math.min(5 * (attempt + 1), 50)));
    }
    throw new TroupeError('service_unavailable', 'The conversation is busy starting elsewhere; try again.');
  }

  /**
   * Resolves once the room's owner answered for it (at once when it runs here). Before a long
   * call, this bounds the wait for an owner that no longer has the room: a dead owner is
   * `RoomGone` (its actor is made again), a live one that does not answer is a prompt 503.
   */
  async acknowledge(room: RoomRef): Promise<void> {
    if (room.processId === matchMaker.processId) {
      if (!matchMaker.getLocalRoomById(room.roomId)) throw new RoomGone(room.roomId);
      return;
    }
    // Twice: an actor listed a moment before it answers on its channel (just made on another
    // process), or whose process just died (its heartbeat not yet expired), gets a second look.
    let failure: unknown;
    for (let attempt = 0; attempt < ACK_ATTEMPTS; attempt++) {
      // With no arguments, Colyseus answers a room's property: the cheapest call there is.
      const ack = matchMaker.remoteRoomCall(room.roomId, 'roomId', undefined, ACK_TIMEOUT_MS) as Promise<unknown>;
      try {
        await this.#ownership.watch(room.processId, ack, () => new RoomGone(room.roomId));
        return;
      } catch (err) {
        if (err instanceof RoomGone) throw err;
        if (!(await this.#ownership.alive(room.processId).catch(() => true))) throw new RoomGone(room.roomId);
        failure = err;
      }
    }
    throw new TroupeError('service_unavailable', 'The process running this actor did not answer for it; try again.', { detailCode: 'actor_unresponsive', cause: failure });
  }

  /**
   * Fails the calls to other processes still waiting when the presence link to Redis drops:
   * their answers may be lost with it. Callers retry with the same client key, which finds a
   * message already stored (and its reply) instead of storing it twice.
   */
  #failPendingOnLoss(): void {
    this.onPresenceLost(() => {
      for (const fail of this.#pendingRemote) fail();
      this.#pendingRemote.clear();
    });
  }

  /** A caller of one kind of actor, its method names and arguments checked against `M`. */
  caller<M>(): ActorCaller<M> {
    return (room, method, args, timeoutMs) => this.call(room, method, args as unknown[], timeoutMs);
  }

  /**
   * Calls `method` on the room wherever it runs (directly when it runs here). A room listed as
   * this process's but no longer in it is being disposed: that is `RoomGone` at once, rather
   * than a call over presence that nothing would ever answer.
   */
  async call<T>(room: RoomRef, method: string, args: unknown[], timeoutMs: number): Promise<T> {
    if (room.processId === matchMaker.processId && !matchMaker.getLocalRoomById(room.roomId)) throw new RoomGone(room.roomId);
    const call = matchMaker.remoteRoomCall(room.roomId, method, args, timeoutMs) as Promise<T>;
    if (room.processId === matchMaker.processId) return call;
    // Its answer travels over Redis: if the link drops meanwhile, the caller retries.
    let fail!: () => void;
    const linkLost = new Promise<never>((_, reject) => (fail = () => reject(new RoomGone(room.roomId))));
    linkLost.catch(() => {});
    this.#pendingRemote.add(fail);
    // A process that dies mid-call never answers: its actor is made again elsewhere instead.
    const watched = this.#ownership.watch(room.processId, Promise.race([call, linkLost]), () => new RoomGone(room.roomId));
    return watched.finally(() => this.#pendingRemote.delete(fail));
  }

  /**
   * Calls `listener` once each time the presence's subscription connection to Redis is lost
   * (events from other processes stop arriving until it is back). Never with in-memory presence.
   */
  onPresenceLost(listener: () => void): void {
    const sub = (this.presence as unknown as { sub?: { on(event: string, cb: () => void): void } }).sub;
    if (!this.#options.redisUrl || !sub) return;
    let up = true;
    const lost = () => {
      if (!up) return;
      up = false;
      listener();
    };
    sub.on('error', lost);
    sub.on('close', lost);
    sub.on('ready', () => (up = true));
  }

  /** This process's id, as Colyseus names it. */
  get processId(): string {
    return matchMaker.processId;
  }

  /** Whether another process still runs (its heartbeat; true without Redis). */
  healthy(processId: string): Promise<boolean> {
    return this.#ownership.alive(processId);
  }

  /** Whether the room runs in this process. */
  isLocal(roomId: string): boolean {
    return matchMaker.getLocalRoomById(roomId) !== undefined;
  }

  /** Resolves once the presence (Redis, when configured) answers a command. */
  async ping(): Promise<void> {
    await this.presence.exists('troupe:ping');
  }

  async release(): Promise<void> {
    if (--this.#users > 0) return;
    ActorSystem.#current = null;
    await matchMaker.gracefullyShutdown().catch((err: unknown) => {
      if (err !== 'already_shutting_down') throw err;
    });
    await this.#ownership.stop();
    this.presence.shutdown();
    await this.#driver.shutdown();
  }
}
