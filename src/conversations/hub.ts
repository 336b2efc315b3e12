import type { ClientResult } from '../capabilities/executor.ts';

/** Server messages of the conversation WebSocket, as the interface defines them (plus extras noted). */
export type ConversationEvent =
  | { type: 'ready' }
  | { type: 'chunk'; characterId: string; content: string; done: boolean }
  /** `callId` is an addition: a client_function_call's result is sent back with it. */
  | { type: 'capability'; characterId: string; name: string; params: Record<string, unknown>; callId: string }
  | { type: 'error'; message: string };

type Listener = (event: ConversationEvent) => void;

/**
 * Who listens to which conversation in this process, and the client_function_call results
 * being waited for. Every socket of a conversation gets the same events.
 */
export class ConversationHub {
  readonly #listeners = new Map<string, Set<Listener>>();
  readonly #pending = new Map<string, (result: ClientResult) => void>();

  subscribe(conversationId: string, listener: Listener): () => void {
    let set = this.#listeners.get(conversationId);
    if (!set) {
      set = new Set();
      this.#listeners.set(conversationId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(conversationId);
    };
  }

  publish(conversationId: string, event: ConversationEvent): void {
    for (const listener of this.#listeners.get(conversationId) ?? []) listener(event);
  }

  listeners(conversationId: string): number {
    return this.#listeners.get(conversationId)?.size ?? 0;
  }

  /** Waits for a client's answer to `callId`; resolves `{received: false}` after the timeout. */
  awaitResult(conversationId: string, callId: string, timeoutMs: number, signal: AbortSignal): Promise<ClientResult> {
    const key = `${conversationId}:${callId}`;
    return new Promise((resolve) => {
      const finish = (result: ClientResult) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#pending.delete(key);
        resolve(result);
      };
      const onAbort = () => finish({ received: false });
      const timer = setTimeout(() => finish({ received: false }), timeoutMs);
      signal.addEventListener('abort', onAbort);
      this.#pending.set(key, finish);
    });
  }

  /** A client's answer; false when nothing waits for that call (late, unknown or answered). */
  resolveResult(conversationId: string, callId: string, result: unknown): boolean {
    const finish = this.#pending.get(`${conversationId}:${callId}`);
    if (!finish) return false;
    finish({ received: true, result });
    return true;
  }
}
