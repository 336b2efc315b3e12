import type { ConversationEvent } from './events.ts';
import type { Conversation } from './repository.ts';
import type { ExchangeResult } from './service.ts';

/**
 * Who is talking: live clients (WebSocket, Colyseus) wait for client_function_call results;
 * HTTP callers get the calls back in their reply instead.
 */
export type Surface = 'http' | 'live';

/** A Colyseus SDK matchmaking request (`client.joinById`, `client.reconnect`). */
export interface SeatRequest {
  method: 'joinById' | 'reconnect';
  /** The SDK's options body. */
  options: Record<string, unknown>;
  /** The API key the game client authenticated with (`client.auth.token`). */
  token: string;
}

/**
 * How every surface reaches a conversation: the HTTP routes, the conversation WebSocket,
 * Colyseus game clients (matchmaking included) and rooms. The conversation's actor may run in
 * any process; implementations find or make it (`actors/conversation-actors.ts`). Ids of
 * another project's conversations are not found (404).
 */
export interface ConversationGateway {
  /** The conversation; its actor runs somewhere afterwards. */
  open(projectId: string, conversationId: string): Promise<Conversation>;
  /**
   * A player's message and the character's reply, in the conversation's order; both are stored.
   * With the client's `idempotencyKey`, a retry stores the message once and gets the same reply.
   */
  exchange(projectId: string, conversationId: string, content: string, surface: Surface, idempotencyKey?: string): Promise<ExchangeResult>;
  /** Mode `analysis`: an out-of-character answer streamed to `onText`, never stored. */
  analyse(projectId: string, conversationId: string, question: string, onText: (delta: string) => void): Promise<void>;
  /** A live client's answer to a client_function_call; false when nothing waits for `callId`. */
  capabilityResult(conversationId: string, callId: string, result: unknown): Promise<boolean>;
  /** Events of the conversation from now on; `onLost` if delivery can no longer be complete. */
  subscribe(conversationId: string, listener: (event: ConversationEvent) => void, onLost?: () => void): Promise<() => void>;
  /** A seat in the conversation's Colyseus room for a game client, wherever the room runs. */
  reserveSeat(projectId: string, conversationId: string, request: SeatRequest): Promise<Record<string, unknown>>;
  /** Resolves once the shared actor state (Redis, when configured) answers. */
  ping(): Promise<void>;
}
