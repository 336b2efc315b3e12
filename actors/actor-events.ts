import { randomUUID } from 'node:crypto';
import type { Presence } from '@colyseus/core';
import type { ConversationEvent } from '../src/conversations/events.ts';
import { OpenReplies, type StreamedEvent } from './open-replies.ts';

type Listener<E> = (event: E) => void;
/** What travels on the channel: the event, which ActorEvents published it, from which process. */
type Published<E> = { origin: string; processId: string; event: E };

export interface ActorEventsOptions {
  /** This process, as Colyseus names it. */
  processId: string;
  /** The presence channel of actor `id` is this prefix + id. */
  channelPrefix?: string;
  /** Health check of another process; with it, replies from a process that dies still end. */
  healthy?: (processId: string) => Promise<boolean>;
  checkIntervalMs?: number;
}


/**
 * Fan-out of an actor's events (a conversation's, a room's) to the plain WebSockets of every
 * process. The actor hands
 * each event to this server's own listeners directly, then publishes it once on the
 * conversation's presence channel (Redis pub/sub with REDIS_URL, in memory otherwise) for the
 * others; each server subscribes once per conversation with listeners and hands every event
 * to each of them, in publication order. Local delivery needs no Redis, so a Redis outage
 * cannot cost the sockets of a conversation whose actor runs here a single event.
 */
export class ActorEvents<E extends StreamedEvent> {
  readonly #presence: Presence;
  readonly #origin = randomUUID();
  readonly #topics = new Map<string, { listeners: Set<Listener<E>>; receive: (published: Published<E>) => void; ready: Promise<unknown> }>();
  readonly #lostHandlers = new Map<Listener<E>, () => void>();
  readonly #prefix: string;
  readonly #lostEvent: (replyId: string) => E;
  readonly #processId: string;
  readonly #openReplies: OpenReplies | null;

  constructor(presence: Presence, lostEvent: (replyId: string) => E, options: ActorEventsOptions = { processId: 'local' }) {
    this.#presence = presence;
    this.#lostEvent = lostEvent;
    this.#processId = options.processId;
    this.#prefix = options.channelPrefix ?? 'troupe:conversation:';
    const { healthy } = options;
    this.#openReplies = healthy
      ? new OpenReplies({ healthy, intervalMs: options.checkIntervalMs ?? 1_500, end: (conversationId, replyId) => this.#endLost(conversationId, replyId) })
      : null;
  }

  /** A reply from a process that died: its listeners here get the `error` that ends it. */
  #endLost(id: string, replyId: string): void {
    const event = this.#lostEvent(replyId);
    for (const each of this.#topics.get(id)?.listeners ?? []) each(event);
  }

  #channel(id: string): string {
    return this.#prefix + id;
  }

  publish(conversationId: string, event: E): void {
    const topic = this.#topics.get(conversationId);
    if (topic) for (const each of topic.listeners) each(event);
    const published: Published<E> = { origin: this.#origin, processId: this.#processId, event };
    // Other servers' listeners; a failure (Redis down) is theirs to notice, and is logged once
    // by the connection, so it must not surface here as an unhandled rejection.
    Promise.resolve(this.#presence.publish(this.#channel(conversationId), published)).catch(() => {});
  }

  /**
   * The presence lost its connection: listeners of conversations whose actor runs elsewhere
   * (`isLocal` false) can no longer be sure to get every event, so each is told through the
   * `onLost` it subscribed with, rather than left with a reply that has holes.
   */
  lost(isLocal: (conversationId: string) => boolean): void {
    for (const [conversationId, topic] of this.#topics) {
      if (isLocal(conversationId)) continue;
      for (const listener of topic.listeners) this.#lostHandlers.get(listener)?.();
    }
  }

  /** Resolves once events published from now on reach `listener`; call the result to stop. */
  async subscribe(conversationId: string, listener: Listener<E>, onLost?: () => void): Promise<() => void> {
    if (onLost) this.#lostHandlers.set(listener, onLost);
    let topic = this.#topics.get(conversationId);
    if (!topic) {
      const listeners = new Set<Listener<E>>();
      const receive = (published: Published<E>) => {
        if (published.origin === this.#origin) return; // delivered already, in publish()
        if (published.processId !== this.#processId) this.#openReplies?.seen(conversationId, published.processId, published.event);
        for (const each of listeners) each(published.event);
      };
      topic = { listeners, receive, ready: this.#presence.subscribe(this.#channel(conversationId), receive) };
      this.#topics.set(conversationId, topic);
    }
    topic.listeners.add(listener);
    await topic.ready;
    const current = topic;
    return () => {
      this.#lostHandlers.delete(listener);
      current.listeners.delete(listener);
      if (current.listeners.size === 0 && this.#topics.get(conversationId) === current) {
        this.#topics.delete(conversationId);
        this.#presence.unsubscribe(this.#channel(conversationId), current.receive);
      }
    };
  }

  /** Local listeners of a conversation (tests and metrics). */
  listeners(conversationId: string): number {
    return this.#topics.get(conversationId)?.listeners.size ?? 0;
  }
}

/** A conversation's events. */
export type ConversationEvents = ActorEvents<ConversationEvent>;

/** What a conversation's listeners get when the process answering died mid-reply. */
export function conversationLost(replyId: string): ConversationEvent {
  return { type: 'error', message: 'The process answering this conversation stopped mid-reply; send the message again.', code: 'actor_lost', param: null, replyId };
}
