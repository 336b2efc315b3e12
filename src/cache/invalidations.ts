import { notify, type Database, type Executor, type Unlisten } from '../db/database.ts';
import { ReadCache } from './read-cache.ts';

/**
 * What a cached entry is keyed by: a character or capability id, the hash of an API key, or
 * (`characterDocuments`) the character whose set of ready documents changed.
 */
export type InvalidationTopic = 'character' | 'capability' | 'apiKey' | 'characterDocuments';
const TOPICS: readonly unknown[] = ['character', 'capability', 'apiKey', 'characterDocuments'] satisfies InvalidationTopic[];

interface Subscriber {
  onInvalidate(id: string): void;
  onReset(): void;
}

const CHANNEL = 'troupe_invalidate';

/**
 * Tells every process sharing the database that cached entries changed. Writers call
 * `publish(tx, …)` inside their transaction (delivered to other processes on commit) and
 * `applyLocal(…)` after it commits, so this process reads its own writes immediately.
 */
export class Invalidations {
  readonly #subscribers = new Map<InvalidationTopic, Subscriber[]>();
  readonly #database: Database;
  #unlisten: Unlisten | null = null;

  constructor(database: Database) {
    this.#database = database;
  }

  async start(): Promise<void> {
    this.#unlisten = await this.#database.listen(
      CHANNEL,
      (payload) => this.#receive(payload),
      () => this.#resetAll(),
    );
  }

  async stop(): Promise<void> {
    await this.#unlisten?.();
    this.#unlisten = null;
  }

  subscribe(topic: InvalidationTopic, subscriber: Subscriber): void {
    const list = this.#subscribers.get(topic) ?? [];
    list.push(subscriber);
    this.#subscribers.set(topic, list);
  }

  /** A read cache whose entries this topic's invalidations evict (and resets clear). */
  cache<T>(topic: InvalidationTopic, options: { maxEntries: number; load: (key: string) => Promise<T | undefined> }): ReadCache<T> {
    const cache = new ReadCache<T>(options);
    this.subscribe(topic, { onInvalidate: (id) => cache.invalidate(id), onReset: () => cache.clear() });
    return cache;
  }

  async publish(executor: Executor, topic: InvalidationTopic, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await notify(executor, CHANNEL, JSON.stringify({ topic, ids }));
  }

  applyLocal(topic: InvalidationTopic, ids: readonly string[]): void {
    for (const subscriber of this.#subscribers.get(topic) ?? []) {
      for (const id of ids) subscriber.onInvalidate(id);
    }
  }

  #receive(payload: string): void {
    let message: { topic?: unknown; ids?: unknown };
    try {
      message = JSON.parse(payload) as typeof message;
    } catch {
      this.#resetAll();
      return;
    }
    const { topic, ids } = message;
    if (TOPICS.includes(topic) && Array.isArray(ids)) {
      this.applyLocal(topic as InvalidationTopic, ids.filter((id): id is string => typeof id === 'string'));
    } else {
      this.#resetAll();
    }
  }

  #resetAll(): void {
    for (const list of this.#subscribers.values()) for (const s of list) s.onReset();
  }
}
