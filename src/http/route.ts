import type { z } from 'zod';
import type { Principal } from '../projects/service.ts';
import type { Resources } from '../resources.ts';
import type { ReplySink, WebSocketHandler } from './types.ts';

/** `key-or-agent`: an API key, or a voice agent's token (src/rooms/agent-token.ts) for that one room. */
export type Auth = 'none' | 'key' | 'key-or-agent' | 'admin' | 'metrics';

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** Set on `auth: 'key'` routes. */
  principal: Principal;
  requestId: string;
  signal: AbortSignal;
  resources: Resources;
  /** The request's own URL pieces, for Link headers. */
  path: string;
  /** Request headers, lower-cased names. */
  headers: Readonly<Record<string, string>>;
  /** The unread body, for routes without a `body` schema that read it themselves (uploads). */
  rawBody: AsyncIterable<Uint8Array>;
}

export interface RouteResult {
  status?: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Body already serialized (e.g. Prometheus text, or a studio file's bytes). */
  raw?: { contentType: string; text: string | Uint8Array };
  /** A streamed body (e.g. server-sent events); `headers` should set its content type. */
  stream?: (sink: ReplySink) => Promise<void>;
}

export interface RouteDefinition<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** Express-style path, e.g. `/characters/:characterId`. */
  path: string;
  auth: Auth;
  summary: string;
  tags: readonly string[];
  params?: P;
  query?: Q;
  body?: B;
  /** Documented success reply. */
  response: { status: number; schema?: z.ZodType; description: string; contentType?: string };
  /** A body the route reads itself (`rawBody`), documented as this content type and JSON schema. */
  rawRequest?: RawRequestDoc;
  /** Documented error statuses besides 400/401/500, which every API route can answer. */
  errors?: readonly number[];
  handler: (ctx: RouteContext<z.infer<P>, z.infer<Q>, z.infer<B>>) => Promise<RouteResult>;
  /**
   * Makes the route a WebSocket endpoint: upgrade requests get here (the API key may come as
   * `?token=`), plain requests get `handler`. Throwing refuses the upgrade with that error.
   */
  websocket?: (ctx: RouteContext<z.infer<P>, z.infer<Q>, undefined>) => Promise<WebSocketHandler>;
}

export interface RawRequestDoc {
  contentType: string;
  schema: Record<string, unknown>;
}

/** A route with its types erased, as the router stores it. */
export interface Route {
  method: string;
  path: string;
  auth: Auth;
  summary: string;
  tags: readonly string[];
  params: z.ZodType | undefined;
  query: z.ZodType | undefined;
  body: z.ZodType | undefined;
  response: { status: number; schema?: z.ZodType; description: string; contentType?: string };
  rawRequest: RawRequestDoc | undefined;
  errors: readonly number[];
  handler: (ctx: RouteContext<unknown, unknown, unknown>) => Promise<RouteResult>;
  websocket: ((ctx: RouteContext<unknown, unknown, undefined>) => Promise<WebSocketHandler>) | undefined;
}

export function defineRoute<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType>(
  definition: RouteDefinition<P, Q, B>,
): Route {
  return {
    method: definition.method,
    path: definition.path,
    auth: definition.auth,
    summary: definition.summary,
    tags: definition.tags,
    params: definition.params,
    query: definition.query,
    body: definition.body,
    response: definition.response,
    errors: definition.errors ?? [],
    handler: definition.handler as Route['handler'],
    websocket: definition.websocket as Route['websocket'],
    rawRequest: definition.rawRequest,
  };
}
