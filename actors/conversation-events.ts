import { randomUUID } from 'node:crypto';
import type { Presence } from '@colyseus/core';
import type { ConversationEvent } from '../src/conversations/events.ts';
import { OpenReplies } from './open-replies.ts';

type Listener = (event: ConversationEvent) => void;
/** What travels on the channel: the event, which ConversationEvents published it, from which process. */
type Published = { origin: string; processId: string; event: ConversationEvent };

export interface ConversationEventsOptions {
  /** This process, as Colyseus names it. */
  processId: string;
  /** Health check of another process; with it, replies from a process that dies still end. */
  healthy?: (processId: string) => Promise<boolean>;
  checkIntervalMs?: number;
}

const channel = (conversationId: string) => `troupe:conversation:${conversationId}`;

/**
 * Fan-out of a conversation's events to the plain WebSockets of every process. The actor hands
 * each event to this server's own listeners directly, then publishes it once on the
 * conversation's presence channel (Redis pub/sub with REDIS_URL, in memory otherwise) for the
 * others; each server subscribes once per conversation with listeners and hands every event
 * to each of them, in publication order. Local delivery needs no Redis, so a Redis outage
 * cannot cost the sockets of a conversation whose actor runs here a single event.
 */
export class ConversationEvents {
  readonly #presence: Presence;
  readonly #origin = randomUUID();
  readonly #topics = new Map<string, { listeners: Set<Listener>; receive: (published: Published) => void; ready: Promise<unknown> }>();
  readonly #lostHandlers = new Map<Listener, () => void>();
  readonly #processId: string;
  readonly #openReplies: OpenReplies | null;

  constructor(presence: Presence, options: ConversationEventsOptions = { processId: 'local' }) {
    this.#presence = presence;
    this.#processId = options.processId;
    const { healthy } = options;
    this.#openReplies = healthy
      ? new OpenReplies({ healthy, intervalMs: options.checkIntervalMs ?? 1_500, end: (conversationId, replyId) => this.#endLost(conversationId, replyId) })
      : null;
  }

  /** A reply from a process that died: its listeners here get the `error` that ends it. */
  #endLost(conversationId: string, replyId: string): void {
    const event: ConversationEvent = {
      type: 'error',
      message: 'The process answering this conversation stopped mid-reply; send the message again.',
      code: 'actor_lost',
      param: null,
      replyId,
    };
    for (const each of this.#topics.get(conversationId)?.listeners ?? []) each(event);
  }

  publish(conversationId: string, event: ConversationEvent): void {
    const topic = this.#topics.get(conversationId);
    if (topic) for (const each of topic.listeners) each(event);
    const published: Published = { origin: this.#origin, processId: this.#processId, event };
    // Other servers' listeners; a failure (Redis down) is theirs to notice, and is logged once
    // by the connection, so it must not surface here as an unhandled rejection.
    Promise.resolve(this.#presence.publish(channel(conversationId), published)).catch(() => {});
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
  async subscribe(conversationId: string, listener: Listener, onLost?: () => void): Promise<() => void> {
    if (onLost) this.#lostHandlers.set(listener, onLost);
    let topic = this.#topics.get(conversationId);
    if (!topic) {
      const listeners = new Set<Listener>();
      const receive = (published: Published) => {
        if (published.origin === this.#origin) return; // delivered already, in publish()
        if (published.processId !== this.#processId) this.#openReplies?.seen(conversationId, published.processId, published.event);
        for (const each of listeners) each(published.event);
      };
      topic = { listeners, receive, ready: this.#presence.subscribe(channel(conversationId), receive) };
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
        this.#presence.unsubscribe(channel(conversationId), current.receive);
      }
    };
  }

  /** Local listeners of a conversation (tests and metrics). */
  listeners(conversationId: string): number {
    return this.#topics.get(conversationId)?.listeners.size ?? 0;
  }
}
