import { randomUUID } from 'node:crypto';
import type { ConversationEvent } from '../src/conversations/events.ts';
import type { ConversationGateway, SeatRequest, Surface } from '../src/conversations/gateway.ts';
import type { Conversation } from '../src/conversations/repository.ts';
import type { ConversationService, ExchangeResult } from '../src/conversations/service.ts';
import { TroupeError } from '../src/errors.ts';
import type { ActorCaller, ActorSystem, RoomRef } from './actor-system.ts';
import type { ConversationEvents } from './actor-events.ts';
import type { AnalysisEvent, ConversationActorMethods, ConversationRoomOptions } from './conversation-room.ts';
import { reserveSeat } from './matchmaking.ts';
import { untilAnswered } from './retry.ts';

export interface ConversationActorsDeps {
  system: ActorSystem;
  roomName: string;
  conversations: ConversationService;
  events: ConversationEvents;
  /** The longest a reply may take (all rounds, capability waits included) before a remote call gives up. */
  replyTimeoutMs: number;
}

/** Conversations whose project and character are known, so warm sends skip a lookup. */
const KNOWN_MAX = 10_000;
const QUICK_CALL_MS = 5_000;

/**
 * The conversation gateway on Colyseus: makes the actor on demand (here, or finds it on
 * whichever process runs it) and calls it. Calls for one conversation leave this process in
 * the order they were made, so one client's messages are replied to in the order it sent them.
 */
export class ConversationActors implements ConversationGateway {
  readonly #deps: ConversationActorsDeps;
  readonly #known = new Map<string, Conversation & { projectId: string }>();
  readonly #dispatch = new Map<string, Promise<unknown>>();
  readonly #call: ActorCaller<ConversationActorMethods>;

  constructor(deps: ConversationActorsDeps) {
    this.#deps = deps;
    this.#call = deps.system.caller<ConversationActorMethods>();
  }

  /** The Colyseus room type of this server's conversation actors. */
  get roomName(): string {
    return this.#deps.roomName;
  }

  /** The conversation (404 unless it is the project's); its actor runs somewhere afterwards. */
  async open(projectId: string, conversationId: string): Promise<Conversation> {
    const conversation = await this.#locate(projectId, conversationId);
    await this.#ensure(projectId, conversation);
    return conversation;
  }

  async exchange(projectId: string, conversationId: string, content: string, surface: Surface, idempotencyKey?: string): Promise<ExchangeResult> {
    // One key for every attempt: an attempt whose actor died after storing the message finds
    // it stored, so a player's message is stored exactly once whatever fails. The client's own
    // key extends that to its retries; the prefix keeps it apart from ours.
    const clientKey = idempotencyKey === undefined ? randomUUID() : `client:${idempotencyKey}`;
    return untilAnswered('conversation', () =>
      this.#inOrder(projectId, conversationId, (room) => this.#call(room, 'exchange', [projectId, content, surface, clientKey], this.#deps.replyTimeoutMs)),
    );
  }

  /** Mode `analysis`: deltas to `onText`, resolved with nothing when the answer is complete. */
  async analyse(projectId: string, conversationId: string, question: string, onText: (delta: string) => void): Promise<void> {
    const channel = `troupe:analysis:${randomUUID()}`;
    const { presence } = this.#deps.system;
    let settle!: (error: TroupeError | null) => void;
    const finished = new Promise<TroupeError | null>((resolve) => (settle = resolve));
    const receive = (event: AnalysisEvent) => {
      if (event.type === 'delta') onText(event.content);
      else settle(event.type === 'done' ? null : new TroupeError('upstream_error', event.message));
    };
    await presence.subscribe(channel, receive);
    try {
      await untilAnswered('conversation', () => this.#inOrder(projectId, conversationId, (room) => this.#call(room, 'analyse', [projectId, question, channel], QUICK_CALL_MS)));
      const error = await finished;
      if (error) throw error;
    } finally {
      presence.unsubscribe(channel, receive);
    }
  }

  /** A live client's answer to a client_function_call; false when nothing waits for it. */
  async capabilityResult(conversationId: string, callId: string, result: unknown): Promise<boolean> {
    // No actor, no waiting call (and no remote call left to time out).
    const room = await this.#deps.system.find(conversationId);
    if (!room) return false;
    try {
      return await this.#call(room, 'capabilityResult', [callId, result], QUICK_CALL_MS);
    } catch {
      return false; // no actor runs the conversation: nothing can be waiting
    }
  }

  /** A game client's seat; joining makes the actor if none runs (404 for another project's). */
  async reserveSeat(projectId: string, conversationId: string, request: SeatRequest): Promise<Record<string, unknown>> {
    await this.open(projectId, conversationId);
    return reserveSeat(conversationId, request);
  }

  /** Resolves once the actor runtime's shared state (Redis, when configured) answers. */
  ping(): Promise<void> {
    return this.#deps.system.ping();
  }

  /** Events of the conversation, from its actor wherever it runs. */
  subscribe(conversationId: string, listener: (event: ConversationEvent) => void, onLost?: () => void): Promise<() => void> {
    return this.#deps.events.subscribe(conversationId, listener, onLost);
  }

  async #locate(projectId: string, conversationId: string): Promise<Conversation & { projectId: string }> {
    const known = this.#known.get(conversationId);
    if (known?.projectId === projectId) return known;
    const conversation = { ...(await this.#deps.conversations.get(projectId, conversationId)), projectId };
    if (this.#known.size >= KNOWN_MAX) this.#known.delete(this.#known.keys().next().value as string);
    this.#known.set(conversationId, conversation);
    return conversation;
  }

  #ensure(projectId: string, conversation: Conversation): Promise<RoomRef> {
    const options: ConversationRoomOptions = { conversationId: conversation.id, projectId, characterId: conversation.characterId };
    return this.#deps.system.ensureRoom(this.#deps.roomName, conversation.id, { ...options });
  }

  /**
   * Locates the conversation and its actor, then issues `call`, strictly after the calls issued
   * before it for the same conversation. Only issuing is serialised here; the actor queues the
   * work itself, so waiting for replies does not hold up other callers.
   */
  async #inOrder<T>(projectId: string, conversationId: string, call: (room: RoomRef) => Promise<T>): Promise<T> {
    const previous = this.#dispatch.get(conversationId) ?? Promise.resolve();
    const issued = previous.then(async () => {
      const conversation = await this.#locate(projectId, conversationId);
      const room = await this.#ensure(projectId, conversation);
      // Acknowledged before the call is sent, so calls stay in order and only an owner that
      // answered for the actor is waited on for the reply.
      await this.#deps.system.acknowledge(room);
      return { pending: call(room) };
    });
    const settled = issued.then(
      () => undefined,
      () => undefined,
    );
    this.#dispatch.set(conversationId, settled);
    void settled.then(() => {
      if (this.#dispatch.get(conversationId) === settled) this.#dispatch.delete(conversationId);
    });
    return (await issued).pending;
  }
}
