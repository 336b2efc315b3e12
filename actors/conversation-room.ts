import { Protocol, Room, type Client, type RoomException, type RoomMethodName } from '@colyseus/core';
import type { Logger } from 'pino';
import { createActor, type Actor } from 'xstate';
import type { ConversationEvent } from '../src/conversations/events.ts';
import type { ConversationGateway, Surface } from '../src/conversations/gateway.ts';
import { handleClientMessage, parseClientMessage } from '../src/conversations/protocol.ts';
import type { Message } from '../src/conversations/repository.ts';
import type { ConversationRef, ConversationService, ExchangeResult, ReplyOutlet } from '../src/conversations/service.ts';
import { TroupeError, notFound, toErrorEvent } from '../src/errors.ts';
import { hasInvalidUtf8String } from '../src/input/msgpack-text.ts';
import type { Principal, ProjectService } from '../src/projects/service.ts';
import { conversationLifecycle, type LifecycleEvent } from '../machines/conversation-lifecycle.ts';
import type { ConversationEvents } from './actor-events.ts';
import { ConversationState, RECENT_MESSAGES, StateCapabilityCall, StateMessage } from './conversation-state.ts';
import { ActorWork, disposeWhenDrained, guarded, PendingResults } from './actor-work.ts';
import { failure, type Envelope } from './envelope.ts';

export interface ConversationRoomDeps {
  conversations: ConversationService;
  /** How the room's own game clients reach it, like every other surface (made after the room type). */
  gateway: () => ConversationGateway;
  projects: ProjectService;
  events: ConversationEvents;
  logger: Logger;
  /** How long an actor with no work and no game clients lives before it is disposed. */
  idleMs: number;
  /** Where game clients reach this process, when they may not reach it where they matchmade. */
  publicAddress: () => string | undefined;
  /** This server's live actors, for its shutdown. */
  live: Set<ConversationRoom>;
}

export interface ConversationRoomOptions {
  conversationId: string;
  projectId: string;
  characterId: string;
}

/** Analysis output, published on the channel the caller chose. */
export type AnalysisEvent = { type: 'delta'; content: string } | { type: 'done' } | { type: 'error'; message: string };

const NEVER = new AbortController().signal;

/** What other processes call on a conversation actor (through `ActorSystem`), JSON in and out. */
export interface ConversationActorMethods {
  exchange(projectId: string, content: string, surface: Surface, clientKey?: string): Promise<Envelope<ExchangeResult>>;
  analyse(projectId: string, question: string, channel: string): Envelope<null>;
  capabilityResult(callId: string, result: unknown): boolean;
}

/**
 * The conversation actor: one Colyseus room per active conversation, with the conversation's
 * id as the room id. It owns the conversation's ordering (one message at a time, in arrival
 * order, from every surface), fans its events out (room messages to Colyseus clients, presence
 * to plain WebSockets anywhere), keeps the schema state game clients see, and waits for
 * client_function_call results. Its lifecycle is the XState machine in `machines/`.
 *
 * Methods other processes call (through `matchMaker.remoteRoomCall`) take and return JSON.
 */
export class ConversationRoom extends Room<{ state: ConversationState }> implements ConversationActorMethods {
  /** Set by the subclass `conversationRoomType` makes for each server. */
  declare readonly deps: ConversationRoomDeps;
  #conversation: ConversationRef = { id: '', projectId: '', characterId: '' };
  readonly #work = new ActorWork({
    started: () => this.#signal({ type: 'work.started' }),
    finished: () => this.#signal({ type: 'work.finished' }),
    failed: (err) => {
      if (err instanceof TroupeError && err.detailCode === 'actor_superseded') {
        // Another process took the conversation over (this one was cut off): go, and let
        // the caller send the message again, to the new owner.
        this.deps.logger.warn({ conversationId: this.roomId }, 'conversation actor superseded by another process; disposing it');
        this.#signal({ type: 'shutdown' });
        return { ok: false, retry: true };
      }
      if (!(err instanceof TroupeError) || err.status >= 500) this.deps.logger.error({ err, conversationId: this.roomId }, 'conversation reply failed');
      return undefined;
    },
  });
  readonly #pending = new PendingResults(this.clock);
  #lifecycle: Actor<typeof conversationLifecycle> | null = null;
  #disposed: Promise<void> | null = null;
  #epoch = 0;

  override async onCreate(options: ConversationRoomOptions): Promise<void> {
    this.roomId = options.conversationId;
    this.autoDispose = false;
    this.#conversation = { id: options.conversationId, projectId: options.projectId, characterId: options.characterId };
    const state = new ConversationState();
    state.conversationId = options.conversationId;
    state.characterId = options.characterId;
    state.speaking = false;
    state.partialReply = '';
    // The fencing token first: from now on only this actor's writes are accepted.
    this.#epoch = await this.deps.conversations.claim(options.conversationId);
    // Rebuilt from PostgreSQL: the actor holds nothing that is not also stored.
    for (const message of await this.deps.conversations.latestMessages(options.conversationId, RECENT_MESSAGES)) {
      state.messages.push(toStateMessage(message));
    }
    this.setState(state);
    // Seat reservations send game clients here. Colyseus stamps one address per process; each
    // server in the process stamps its own.
    const address = this.deps.publicAddress();
    if (address) (this as unknown as { _listing: { publicAddress?: string } })._listing.publicAddress = address;
    this.deps.live.add(this);
    const machine = conversationLifecycle.provide({ actions: { dispose: () => this.#dispose() } });
    // Its timers run on the room's clock, inside the room's error boundary.
    const clock = { setTimeout: (fn: () => void, ms: number) => this.clock.setTimeout(fn, ms), clearTimeout: (timer: { clear(): void }) => timer.clear() };
    this.#lifecycle = createActor(machine, { input: { idleMs: this.deps.idleMs }, clock: clock as never });
    this.#lifecycle.subscribe({ error: (err) => this.deps.logger.error({ err, conversationId: this.roomId }, 'conversation lifecycle failed') });
    this.#lifecycle.start();
    refuseInvalidUtf8(this);
    // Handlers run after uWS' callback returns (see `later` in src/http/uws.ts for why), still
    // inside the room's error boundary.
    this.onMessage('message', (client, message: unknown) => setImmediate(() => guarded(this, 'onMessage', () => this.#fromClient(client, message))));
    // The same protocol as the WebSocket's `{type: "capability_result", …}`, by message type.
    this.onMessage('capability_result', (client, message: unknown) =>
      this.#fromClient(client, typeof message === 'object' && message !== null ? { ...message, type: 'capability_result' } : message),
    );
  }

  override onJoin(_client: Client, _options: unknown, auth: Principal | undefined): void {
    // Matchmaking checked the conversation belongs to the key's project; check again here.
    if (!auth || auth.projectId !== this.#conversation.projectId) throw notFound('conversation', this.roomId);
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
    this.deps.live.delete(this);
    this.#lifecycle?.stop();
    this.#pending.cancelAll();
  }

  /** The error boundary around every hook, message handler and timer Colyseus runs. */
  override onUncaughtException(error: RoomException, method: RoomMethodName): void {
    this.deps.logger.error({ err: error, method, conversationId: this.roomId }, 'conversation actor failed');
  }

  /** A player's message and the character's reply. */
  exchange(projectId: string, content: string, surface: Surface, clientKey?: string): Promise<Envelope<ExchangeResult>> {
    if (projectId !== this.#conversation.projectId) return Promise.resolve(failure(notFound('conversation', this.roomId)));
    const outlet: ReplyOutlet = {
      publish: (event) => this.#publish(event),
      stored: (message) => this.#remember(message),
      ...(surface === 'live' ? { awaitResult: (callId: string, ms: number, signal: AbortSignal) => this.#pending.wait(callId, ms, signal) } : {}),
    };
    return this.#work.enqueue(async () => {
      this.state.speaking = true;
      this.state.partialReply = '';
      try {
        return await this.deps.conversations.exchange(this.#conversation, content, outlet, NEVER, clientKey, this.#epoch);
      } finally {
        this.state.speaking = false;
        this.state.partialReply = '';
      }
    });
  }

  /** Mode `analysis`: queued like a message, its text published on `channel`, never stored. */
  analyse(projectId: string, question: string, channel: string): Envelope<null> {
    if (projectId !== this.#conversation.projectId) return failure(notFound('conversation', this.roomId));
    if (this.#work.closing) return { ok: false, retry: true };
    const send = (event: AnalysisEvent) => this.presence.publish(channel, event);
    const queued = this.#work.enqueue(() => this.deps.conversations.analyse(this.#conversation, question, (content) => send({ type: 'delta', content }), NEVER));
    void queued.then((result) => send(result.ok ? { type: 'done' } : { type: 'error', message: 'error' in result ? result.error.message : 'The analysis was interrupted.' }));
    return { ok: true, value: null };
  }

  /** A client's answer to a client_function_call; false when nothing waits for `callId`. */
  capabilityResult(callId: string, result: unknown): boolean {
    return this.#pending.answer(callId, result);
  }

  #publish(event: ConversationEvent): void {
    this.deps.events.publish(this.roomId, event);
    this.broadcast(event.type, event);
    if (event.type === 'chunk') {
      this.state.partialReply = event.done ? '' : this.state.partialReply + event.content;
    } else if (event.type === 'capability') {
      this.state.lastCapability = new StateCapabilityCall({
        characterId: event.characterId,
        name: event.name,
        params: JSON.stringify(event.params),
        callId: event.callId,
      });
    }
  }

  #remember(message: Message): void {
    const { messages } = this.state;
    messages.push(toStateMessage(message));
    while (messages.length > RECENT_MESSAGES) messages.shift();
  }

  /** Game clients' messages: the one live-client protocol, through the gateway like every surface. */
  #fromClient(client: Client, raw: unknown): void {
    const live = { ...this.#conversation, conversationId: this.#conversation.id, send: (event: ConversationEvent) => client.send(event.type, event) };
    handleClientMessage(this.deps.gateway(), this.deps.logger, live, parseClientMessage(raw));
  }



  /** Tells the lifecycle machine; a disposed actor's machine has stopped and hears nothing. */
  #signal(event: LifecycleEvent): void {
    if (this.#lifecycle?.getSnapshot().status === 'active') this.#lifecycle.send(event);
  }

  /** Disposes the actor once its work is done (its server is stopping); resolves once it is gone. */
  close(): Promise<void> {
    this.#signal({ type: 'shutdown' });
    return this.#disposed ?? Promise.resolve();
  }

  #dispose(): void {
    this.#disposed ??= disposeWhenDrained(this, this.#work, (err: unknown) => this.deps.logger.error({ err, conversationId: this.roomId }, 'conversation actor could not be disposed'));
  }
}

/**
 * Colyseus' msgpack decoder turns invalid UTF-8 into U+FFFD; such a message is answered with an
 * `error` event before it is decoded, like an HTTP body or a WebSocket frame. Colyseus binds
 * `_onMessage` (private in its types) to each client as it joins, so the check wraps it here.
 */
/** The low 5 bits of a frame's first byte are its protocol code (`PROTOCOL_CODE_MASK` in @colyseus/shared-types). */
const PROTOCOL_CODE_MASK = 0x1f;

export function refuseInvalidUtf8(room: Room): void {
  const target = room as unknown as { _onMessage(client: Client, buffer: Uint8Array): void };
  const decode = target._onMessage.bind(room);
  target._onMessage = (client, buffer) => {
    const code = (buffer?.[0] ?? 0) & PROTOCOL_CODE_MASK;
    if ((code === Protocol.ROOM_DATA || code === Protocol.ROOM_REQUEST) && hasInvalidUtf8String(buffer.subarray(1))) {
      client.send('error', toErrorEvent(new TroupeError('invalid_request', 'The message is not valid UTF-8; send text encoded as UTF-8.', { detailCode: 'invalid_utf8' })));
      return;
    }
    decode(client, buffer);
  };
}

function toStateMessage(message: Message): StateMessage {
  return new StateMessage({ id: message.id, role: message.role, content: message.content, createdAt: message.createdAt });
}

/** A room class bound to one server's services; Colyseus instantiates it with no arguments. */
export function conversationRoomType(deps: ConversationRoomDeps): typeof ConversationRoom {
  return class BoundConversationRoom extends ConversationRoom {
    override readonly deps = deps;

    /** Game clients authenticate with an API key (`client.auth.token`). */
    static override async onAuth(token: string): Promise<Principal> {
      const principal = await deps.projects.authenticate(token);
      if (!principal) throw new TroupeError('invalid_api_key', 'Invalid API key: set client.auth.token to a Troupe API key.');
      return principal;
    }
  };
}
