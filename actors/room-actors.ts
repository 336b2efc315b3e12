import { randomUUID } from 'node:crypto';
import type { SeatRequest } from '../src/conversations/gateway.ts';
import type { RoomEvent } from '../src/rooms/events.ts';
import type { RoomChange, RoomGateway, SpokenLine, SpokenReport } from '../src/rooms/gateway.ts';
import type { TranscriptEntry } from '../src/rooms/repository.ts';
import type { RoomService } from '../src/rooms/service.ts';
import type { ActorCaller, ActorSystem, RoomRef } from './actor-system.ts';
import type { ActorEvents } from './actor-events.ts';
import { reserveSeat } from './matchmaking.ts';
import type { RoomActorMethods, RoomActorOptions } from './room-actor.ts';
import { untilAnswered } from './retry.ts';

export interface RoomActorsDeps {
  system: ActorSystem;
  roomName: string;
  rooms: RoomService;
  events: ActorEvents<RoomEvent>;
}

const QUICK_CALL_MS = 5_000;

/**
 * The room gateway on Colyseus: finds a room's actor (or makes it here, rebuilt from
 * PostgreSQL) and calls it. Lines for one room leave this process in the order they were sent.
 */
export class RoomActors implements RoomGateway {
  readonly #deps: RoomActorsDeps;
  readonly #call: ActorCaller<RoomActorMethods>;
  readonly #dispatch = new Map<string, Promise<unknown>>();

  constructor(deps: RoomActorsDeps) {
    this.#deps = deps;
    this.#call = deps.system.caller<RoomActorMethods>();
  }

  /** The Colyseus room type of this server's room actors. */
  get roomName(): string {
    return this.#deps.roomName;
  }

  async say(projectId: string, roomId: string, line: SpokenLine, idempotencyKey?: string): Promise<TranscriptEntry> {
    // One key for every attempt: a line is stored once, whatever happens to its actor. The
    // client's own key extends that to its retries; the prefix keeps it apart from ours.
    const clientKey = idempotencyKey === undefined ? randomUUID() : `client:${idempotencyKey}`;
    return untilAnswered('room', () => this.#inOrder(projectId, roomId, (room) => this.#call(room, 'say', [projectId, line, clientKey], QUICK_CALL_MS)));
  }

  async changed(projectId: string, roomId: string, change: RoomChange): Promise<void> {
    // A room whose actor is not running learns it from PostgreSQL when it is next made, except
    // a start: a scripted scene opens at once, so that one makes the actor.
    const room = change.kind === 'started' ? await this.#ensure(projectId, roomId) : await this.#deps.system.find(roomId);
    if (!room) {
      // No actor to tell: the room's listeners (sockets on any process) still hear of the end.
      if (change.kind === 'ended') this.#deps.events.publish(roomId, { type: 'ended', endedAt: change.endedAt });
      return;
    }
    await untilAnswered('room', () => this.#call(room, 'changed', [projectId, change], QUICK_CALL_MS));
  }

  async capabilityResult(roomId: string, callId: string, result: unknown): Promise<boolean> {
    const room = await this.#deps.system.find(roomId);
    if (!room) return false;
    try {
      return await this.#call(room, 'capabilityResult', [callId, result], QUICK_CALL_MS);
    } catch {
      return false;
    }
  }

  async voice(projectId: string, roomId: string, characterId: string, attached: boolean): Promise<void> {
    // An agent connecting makes the actor (it is about to speak there); one leaving a room
    // whose actor is gone has nothing to tell.
    const room = attached ? await this.#ensure(projectId, roomId) : await this.#deps.system.find(roomId);
    if (!room) return;
    await untilAnswered('room', () => this.#call(room, 'voice', [projectId, characterId, attached], QUICK_CALL_MS));
  }

  async spoken(roomId: string, report: SpokenReport): Promise<boolean> {
    const room = await this.#deps.system.find(roomId);
    if (!room) return false;
    try {
      return await this.#call(room, 'spoken', [report], QUICK_CALL_MS);
    } catch {
      return false;
    }
  }

  subscribe(roomId: string, listener: (event: RoomEvent) => void, onLost?: () => void): Promise<() => void> {
    return this.#deps.events.subscribe(roomId, listener, onLost);
  }

  async reserveSeat(projectId: string, roomId: string, request: SeatRequest): Promise<Record<string, unknown>> {
    await this.#ensure(projectId, roomId);
    return reserveSeat(roomId, request);
  }

  announce(roomId: string, event: RoomEvent): void {
    this.#deps.events.publish(roomId, event);
  }

  /** The room's actor, made here if none runs (404 for another project's room, 409 once ended). */
  async #ensure(projectId: string, roomId: string): Promise<RoomRef> {
    const room = await this.#deps.rooms.find(projectId, roomId);
    const options: RoomActorOptions = { roomId: room.id, projectId };
    return this.#deps.system.ensureRoom(this.#deps.roomName, room.id, { ...options });
  }

  /** Issues `call` strictly after the calls issued before it for the same room. */
  async #inOrder<T>(projectId: string, roomId: string, call: (room: RoomRef) => Promise<T>): Promise<T> {
    const previous = this.#dispatch.get(roomId) ?? Promise.resolve();
    const issued = previous.then(async () => {
      const room = await this.#ensure(projectId, roomId);
      // Acknowledged before the call is sent: calls stay in order, and only an owner that
      // answered for the room is waited on.
      await this.#deps.system.acknowledge(room);
      return { pending: call(room) };
    });
    const settled = issued.then(
      () => undefined,
      () => undefined,
    );
    this.#dispatch.set(roomId, settled);
    void settled.then(() => {
      if (this.#dispatch.get(roomId) === settled) this.#dispatch.delete(roomId);
    });
    return (await issued).pending;
  }
}
