import { Room, type Client, type RoomException, type RoomMethodName } from '@colyseus/core';
import type { Logger } from 'pino';
import { createActor, type Actor } from 'xstate';
import type { CharacterService } from '../src/characters/service.ts';
import type { ConversationEvent } from '../src/conversations/events.ts';
import { TroupeError, notFound } from '../src/errors.ts';
import type { Principal, ProjectService } from '../src/projects/service.ts';
import type { RoomEvent } from '../src/rooms/events.ts';
import type { RoomChange, RoomGateway, SpokenLine, SpokenReport } from '../src/rooms/gateway.ts';
import { handleRoomClientMessage, parseRoomClientMessage } from '../src/rooms/protocol.ts';
import type { StoredRoom, TranscriptEntry } from '../src/rooms/repository.ts';
import type { RoomScene, SceneOutlet } from '../src/rooms/scene.ts';
import type { RoomService } from '../src/rooms/service.ts';
import { roomLifecycle, roomStatus, type RoomLifecycleEvent } from '../machines/room-lifecycle.ts';
import type { ActorEvents } from './actor-events.ts';
import { refuseInvalidUtf8 } from './conversation-room.ts';
import { ActorWork, disposeWhenDrained, guarded, PendingResults } from './actor-work.ts';
import { failure, type Envelope } from './envelope.ts';
import { RECENT_LINES, RoomLine, RoomMember, RoomState } from './room-state.ts';

export interface RoomActorDeps {
  rooms: RoomService;
  characters: CharacterService;
  scene: RoomScene;
  projects: ProjectService;
  events: ActorEvents<RoomEvent>;
  /** How the room's own game clients reach it, like every other surface (made after the room type). */
  gateway: () => RoomGateway;
  logger: Logger;
  idleMs: number;
  publicAddress: () => string | undefined;
  /** This server's live room actors, for its shutdown. */
  live: Set<RoomActor>;
}

export interface RoomActorOptions {
  roomId: string;
  projectId: string;
}

/** What other processes call on a room actor (through `ActorSystem`), JSON in and out. */
export interface RoomActorMethods {
  say(projectId: string, line: SpokenLine, clientKey: string): Promise<Envelope<TranscriptEntry>>;
  changed(projectId: string, change: RoomChange): Promise<Envelope<null>>;
  capabilityResult(callId: string, result: unknown): boolean;
  voice(projectId: string, characterId: string, attached: boolean): Envelope<null>;
  spoken(report: SpokenReport): boolean;
}

/**
 * How long a line may take to play before the room goes on without its report: generous (a
 * quarter of normal speaking speed), so it only bounds an agent that stopped reporting.
 */
const SPOKEN_BASE_MS = 5_000;
const SPOKEN_MS_PER_CHAR = 250;

/**
 * The room actor: one Colyseus room per active room, with the room's id as its id. It owns
 * the room's order and floor: one line at a time is heard, and after it the characters answer
 * one at a time (never two at once), all through one queue. Events fan out to Colyseus clients
 * (room messages) and to plain WebSockets anywhere (presence). Its lifecycle (created -> live
 * -> ended, and idle disposal) is the XState machine in `machines/room-lifecycle.ts`.
 */
export class RoomActor extends Room<{ state: RoomState }> implements RoomActorMethods {
  declare readonly deps: RoomActorDeps;
  #projectId = '';
  #epoch = 0;
  #lifecycle: Actor<typeof roomLifecycle> | null = null;
  #disposed: Promise<void> | null = null;
  readonly #abort = new AbortController();
  readonly #work = new ActorWork({
    started: () => this.#signal({ type: 'work.started' }),
    finished: () => this.#signal({ type: 'work.finished' }),
    failed: (err) => {
      if (err instanceof TroupeError && err.detailCode === 'actor_superseded') {
        // Another process took the room over (this one was cut off): go, and let the caller
        // send the line again, to the new owner.
        this.deps.logger.warn({ roomId: this.roomId }, 'room actor superseded by another process; disposing it');
        this.#signal({ type: 'shutdown' });
        return { ok: false, retry: true };
      }
      if (!(err instanceof TroupeError) || err.status >= 500) this.deps.logger.error({ err, roomId: this.roomId }, 'room work failed');
      return undefined;
    },
  });
  readonly #pending = new PendingResults(this.clock);
  /** Connected voice agents per character (a reconnecting agent may briefly count twice). */
  readonly #voices = new Map<string, number>();
  /** Lines being played, by replyId: resolved by the agent's report, a timeout or its leaving. */
  readonly #playing = new Map<string, { characterId: string; settle: (report: SpokenReport | null) => void }>();

  override async onCreate(options: RoomActorOptions): Promise<void> {
    this.roomId = options.roomId;
    this.autoDispose = false;
    this.#projectId = options.projectId;
    // The fencing token first: from now on only this actor's transcript writes are accepted.
    this.#epoch = await this.deps.rooms.claim(options.roomId);
    const room = await this.deps.rooms.find(options.projectId, options.roomId);
    const state = new RoomState();
    state.roomId = room.id;
    state.name = room.name;
    state.mode = room.mode;
    state.speaking = '';
    state.partialLine = '';
    this.setState(state);
    await this.#refresh(room);
    for (const entry of (await this.deps.rooms.transcript(options.projectId, options.roomId)).slice(-RECENT_LINES)) this.#remember(entry);
    const address = this.deps.publicAddress();
    if (address) (this as unknown as { _listing: { publicAddress?: string } })._listing.publicAddress = address;
    this.deps.live.add(this);
    const machine = roomLifecycle.provide({
      actions: { dispose: () => this.#dispose(), announce: () => (this.state.status = roomStatus(this.#lifecycle?.getSnapshot().value)) },
    });
    const clock = { setTimeout: (fn: () => void, ms: number) => this.clock.setTimeout(fn, ms), clearTimeout: (timer: { clear(): void }) => timer.clear() };
    const status = room.endedAt ? 'ended' : room.startedAt ? 'live' : 'created';
    this.#lifecycle = createActor(machine, { input: { idleMs: this.deps.idleMs, status }, clock: clock as never });
    this.#lifecycle.subscribe({ error: (err) => this.deps.logger.error({ err, roomId: this.roomId }, 'room lifecycle failed') });
    this.#lifecycle.start();
    state.status = status;
    refuseInvalidUtf8(this);
    this.onMessage('message', (client, message: unknown) => setImmediate(() => guarded(this, 'onMessage', () => this.#fromClient(client, message))));
    this.onMessage('capability_result', (client, message: unknown) =>
      this.#fromClient(client, typeof message === 'object' && message !== null ? { ...message, type: 'capability_result' } : message),
    );
  }

  override onJoin(_client: Client, _options: unknown, auth: Principal | undefined): void {
    if (!auth || auth.projectId !== this.#projectId) throw notFound('room', this.roomId);
    this.#signal({ type: 'client.joined' });
  }

  override onLeave(): void {
    this.#signal({ type: 'client.left' });
  }

  override onBeforeShutdown(): void {
    this.#signal({ type: 'shutdown' });
  }

  override onDispose(): void {
    this.#work.close();
    this.#abort.abort();
    this.deps.live.delete(this);
    this.#lifecycle?.stop();
    this.#pending.cancelAll();
  }

  override onUncaughtException(error: RoomException, method: RoomMethodName): void {
    this.deps.logger.error({ err: error, method, roomId: this.roomId }, 'room actor failed');
  }

  /** A player's line: stored in order, answered by the characters after (in the same queue). */
  say(projectId: string, line: SpokenLine, clientKey: string): Promise<Envelope<TranscriptEntry>> {
    if (projectId !== this.#projectId) return Promise.resolve(failure(notFound('room', this.roomId)));
    if (roomStatus(this.#lifecycle?.getSnapshot().value) === 'ended') return Promise.resolve(failure(ended(this.roomId)));
    let fresh = false;
    const heard = this.#work.enqueue(async () => {
      const result = await this.deps.scene.hear(projectId, this.roomId, { ...line, clientKey }, this.#outlet());
      fresh = result.fresh;
      return result.entry;
    });
    void heard.then((result) => {
      // A retried line (stored before) was answered then: the characters do not answer twice.
      if (result.ok && fresh) void this.#work.enqueue(() => this.deps.scene.play(projectId, this.roomId, this.#outlet(), false, this.#abort.signal));
    });
    return heard;
  }

  /** The stored room changed (participants, start, end): the actor catches up, in its queue. */
  changed(projectId: string, change: RoomChange): Promise<Envelope<null>> {
    if (projectId !== this.#projectId) return Promise.resolve(failure(notFound('room', this.roomId)));
    return this.#work.enqueue(async () => {
      const room = await this.deps.rooms.find(projectId, this.roomId);
      await this.#refresh(room);
      if (change.kind === 'started') {
        // The first start may open a scripted scene with a character (a scene already under
        // way is not opened again: see RoomScene.play).
        this.#signal({ type: 'start' });
        void this.#work.enqueue(() => this.deps.scene.play(projectId, this.roomId, this.#outlet(), true, this.#abort.signal));
      } else if (change.kind === 'ended') {
        this.#signal({ type: 'end' });
        this.#publish({ type: 'ended', endedAt: change.endedAt });
        this.#signal({ type: 'shutdown' });
      }
      return null;
    });
  }

  capabilityResult(callId: string, result: unknown): boolean {
    return this.#pending.answer(callId, result);
  }

  voice(projectId: string, characterId: string, attached: boolean): Envelope<null> {
    if (projectId !== this.#projectId) return failure(notFound('room', this.roomId));
    const count = Math.max(0, (this.#voices.get(characterId) ?? 0) + (attached ? 1 : -1));
    if (count > 0) this.#voices.set(characterId, count);
    else {
      this.#voices.delete(characterId);
      for (const play of [...this.#playing.values()]) if (play.characterId === characterId) play.settle(null);
    }
    return { ok: true, value: null };
  }

  spoken(report: SpokenReport): boolean {
    const play = this.#playing.get(report.replyId);
    if (play?.characterId !== report.characterId) return false;
    play.settle(report);
    return true;
  }

  /** Waits for a voiced line's report; null at once when the character has no voice here. */
  #awaitSpoken(characterId: string, replyId: string, text: string, signal: AbortSignal): Promise<SpokenReport | null> | null {
    if (!this.#voices.has(characterId)) return null;
    return new Promise((resolve) => {
      const timer = this.clock.setTimeout(() => settle(null), SPOKEN_BASE_MS + SPOKEN_MS_PER_CHAR * text.length);
      const settle = (report: SpokenReport | null) => {
        timer.clear();
        signal.removeEventListener('abort', onAbort);
        this.#playing.delete(replyId);
        resolve(report);
      };
      const onAbort = () => settle(null);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#playing.set(replyId, { characterId, settle });
    });
  }

  /** Membership as stored; joins and leaves since the last look are announced. */
  async #refresh(room: StoredRoom): Promise<void> {
    const active = room.participants.filter((p) => p.leftAt === null);
    const before = new Map(this.state.members.map((m) => [m.characterId, m]));
    const names = new Map<string, string>();
    for (const seat of active) {
      const character = await this.deps.characters.get(this.#projectId, seat.characterId).catch(() => null);
      names.set(seat.characterId, character?.name ?? seat.characterId);
    }
    // The first look (as the actor is made) only fills the state; later ones are news.
    const announce = this.#lifecycle !== null;
    for (const seat of active) {
      if (before.has(seat.characterId)) continue;
      const name = names.get(seat.characterId) ?? seat.characterId;
      this.state.members.push(new RoomMember({ characterId: seat.characterId, name, conversationId: seat.conversationId, rtcIdentity: seat.rtcIdentity }));
      if (announce) this.#publish({ type: 'participant', change: 'joined', kind: 'character', characterId: seat.characterId, identity: seat.rtcIdentity, name });
    }
    for (let i = this.state.members.length - 1; i >= 0; i--) {
      const member = this.state.members[i];
      if (!member || active.some((seat) => seat.characterId === member.characterId)) continue;
      this.state.members.splice(i, 1);
      this.#publish({ type: 'participant', change: 'left', kind: 'character', characterId: member.characterId, identity: member.rtcIdentity, name: member.name });
    }
  }

  #outlet(): SceneOutlet {
    return {
      publish: (event) => this.#publish(event),
      awaitResult: (callId, ms, signal) => this.#pending.wait(callId, ms, signal),
      awaitSpoken: (characterId, replyId, text, signal) => this.#awaitSpoken(characterId, replyId, text, signal),
      epoch: this.#epoch,
    };
  }

  #publish(event: RoomEvent): void {
    this.deps.events.publish(this.roomId, event);
    this.broadcast(event.type, event);
    if (event.type === 'chunk') this.state.partialLine = event.done ? '' : this.state.partialLine + event.content;
    else if (event.type === 'speaker') this.state.speaking = event.characterId ?? '';
    else if (event.type === 'transcript') this.#remember(event.entry);
  }

  #remember(entry: TranscriptEntry): void {
    const { transcript } = this.state;
    transcript.push(
      new RoomLine({ id: entry.id, speakerType: entry.speakerType, characterId: entry.characterId ?? '', speakerName: entry.speakerName ?? '', content: entry.content, createdAt: entry.createdAt }),
    );
    while (transcript.length > RECENT_LINES) transcript.shift();
  }

  /** Game clients' messages: the room's live-client protocol, through the gateway like every surface. */
  #fromClient(client: Client, raw: unknown): void {
    const send = (event: RoomEvent | ConversationEvent) => client.send(event.type, event);
    handleRoomClientMessage(this.deps.gateway(), this.deps.logger, { projectId: this.#projectId, roomId: this.roomId, send }, parseRoomClientMessage(raw));
  }

  #signal(event: RoomLifecycleEvent): void {
    if (this.#lifecycle?.getSnapshot().status === 'active') this.#lifecycle.send(event);
  }

  /** Disposes the actor once its work is done (its server is stopping). */
  close(): Promise<void> {
    this.#signal({ type: 'shutdown' });
    return this.#disposed ?? Promise.resolve();
  }

  #dispose(): void {
    this.#disposed ??= disposeWhenDrained(this, this.#work, (err: unknown) => this.deps.logger.error({ err, roomId: this.roomId }, 'room actor could not be disposed'));
  }
}

function ended(roomId: string): TroupeError {
  return new TroupeError('conflict', `Room '${roomId}' has ended; nothing more can be said in it.`, { detailCode: 'room_ended' });
}

/** A room actor class bound to one server's services; Colyseus instantiates it with no arguments. */
export function roomActorType(deps: RoomActorDeps): typeof RoomActor {
  return class BoundRoomActor extends RoomActor {
    override readonly deps = deps;

    static override async onAuth(token: string): Promise<Principal> {
      const principal = await deps.projects.authenticate(token);
      if (!principal) throw new TroupeError('invalid_api_key', 'Invalid API key: set client.auth.token to a Troupe API key.');
      return principal;
    }
  };
}
