import type { Presence } from '@colyseus/core';
import type { ConversationEvent } from '../src/conversations/events.ts';

type Listener = (event: ConversationEvent) => void;

const channel = (conversationId: string) => `troupe:conversation:${conversationId}`;

/**
 * Fan-out of a conversation's events to the plain WebSockets of every process. The actor
 * publishes each event once on the conversation's presence channel (Redis pub/sub with
 * REDIS_URL, in memory otherwise); each process subscribes once per conversation with local
 * sockets and hands every event to each of them, in publication order.
 */
export class ConversationEvents {
  readonly #presence: Presence;
  readonly #topics = new Map<string, { listeners: Set<Listener>; receive: (event: ConversationEvent) => void; ready: Promise<unknown> }>();

  constructor(presence: Presence) {
    this.#presence = presence;
  }

  publish(conversationId: string, event: ConversationEvent): void {
    this.#presence.publish(channel(conversationId), event);
  }

  /** Resolves once events published from now on reach `listener`; call the result to stop. */
  async subscribe(conversationId: string, listener: Listener): Promise<() => void> {
    let topic = this.#topics.get(conversationId);
    if (!topic) {
      const listeners = new Set<Listener>();
      const receive = (event: ConversationEvent) => {
        for (const each of listeners) each(event);
      };
      topic = { listeners, receive, ready: this.#presence.subscribe(channel(conversationId), receive) };
      this.#topics.set(conversationId, topic);
    }
    topic.listeners.add(listener);
    await topic.ready;
    const current = topic;
    return () => {
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
