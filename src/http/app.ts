import { timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { TroupeError, toErrorBody } from '../errors.ts';
import { newRequestId } from '../ids.ts';
import type { Principal } from '../projects/service.ts';
import type { Resources } from '../resources.ts';
import { corsHeaders, preflightHeaders } from './cors.ts';
import type { Route, RouteContext, RouteResult } from './route.ts';
import { Router } from './router.ts';
import { readBody } from './body.ts';
import { isStreamReply, type BufferedReply, type HttpHandler, type HttpReply, type HttpRequest, type UpgradeHandler, type WebSocketHandler } from './types.ts';
import { parseInput } from '../input/validation.ts';
import { checkPercentEncoding, checkText, decodeUtf8 } from '../input/text.ts';
import { verifyAgentToken } from '../rooms/agent-token.ts';
import { requestLogger } from '../observability/request-log.ts';

const JSON_TYPE = 'application/json; charset=utf-8';
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const NO_PRINCIPAL: Principal = Object.freeze({ projectId: '', keyId: '' });

/**
 * The engine-independent core: one function from a plain request to a plain reply. Errors of
 * every kind are mapped here, once, to the `{error:{message,type,param,code}}` body.
 */
export function createApp(resources: Resources, routes: readonly Route[]): { handler: HttpHandler; upgrade: UpgradeHandler; router: Router } {
  const router = new Router();
  for (const route of routes) router.add(route);
  const { config, logger, metrics } = resources;
  const logRequest = requestLogger(logger);

  const handler: HttpHandler = async (request) => {
    const started = performance.now();
    metrics.requestStarted();
    const incomingId = request.headers['x-request-id'];
    const requestId = incomingId && REQUEST_ID.test(incomingId) ? incomingId : newRequestId();
    let routeLabel = 'unmatched';
    let reply: HttpReply;
    try {
      const match = router.match(request.method, request.path);
      if (request.method === 'OPTIONS' && match.kind !== 'not_found') {
        const methods = match.kind === 'found' ? [match.route.method] : match.allow;
        reply = { status: 204, headers: { allow: [...methods, 'OPTIONS'].join(', '), ...preflightHeaders(methods) }, body: '' };
      } else if (match.kind === 'not_found') {
        throw new TroupeError('route_not_found', `No route matches ${request.method} ${request.path}.`);
      } else if (match.kind === 'method_not_allowed') {
        throw new TroupeError('method_not_allowed', `${request.method} is not allowed on ${request.path}; allowed: ${match.allow.join(', ')}.`, {
          headers: { allow: match.allow.join(', ') },
        });
      } else {
        routeLabel = match.route.path;
        reply = await dispatch(match.route, match.params, request, requestId);
      }
    } catch (err) {
      reply = errorReply(err, requestId, request);
    }
    reply.headers['x-request-id'] = requestId;
    if (config.corsOrigins === '*' || config.corsOrigins.length > 0) {
      Object.assign(reply.headers, corsHeaders(config.corsOrigins, request.headers.origin));
    }
    const finished = (status: number) => {
      const durationMs = performance.now() - started;
      metrics.observeRequest(request.method, routeLabel, status, durationMs / 1000);
      logRequest({ requestId, method: request.method, path: request.path, route: routeLabel, status, durationMs: Math.round(durationMs * 1000) / 1000 });
    };
    if (isStreamReply(reply)) {
      // A stream is logged and counted when it ends, so its duration covers the whole body. A new
      // reply, not `reply.stream` replaced: replacing the closure on the route's reply object kept
      // each stream's objects alive through young collections (about 3.4 KB promoted per stream).
      const { stream, status, headers } = reply;
      return {
        status,
        headers,
        stream: async (sink) => {
          try {
            await stream(sink);
          } finally {
            finished(status);
          }
        },
      };
    }
    if (request.method === 'HEAD') reply.body = '';
    finished(reply.status);
    return reply;
  };

  /** WebSocket upgrades: routed, authenticated and validated like requests, refused with the same error body. */
  const upgrade: UpgradeHandler = async (request) => {
    const incomingId = request.headers['x-request-id'];
    const requestId = incomingId && REQUEST_ID.test(incomingId) ? incomingId : newRequestId();
    try {
      const match = router.match('GET', request.path);
      if (match.kind !== 'found' || !match.route.websocket) {
        throw new TroupeError('route_not_found', `No WebSocket endpoint at ${request.path}.`);
      }
      const route = match.route;
      const token = request.query.get('token');
      const principal = await authenticate(route, request, token);
      const params = route.params ? parseInput(route.params, match.params, null) : match.params;
      const query = route.query ? parseInput(route.query, withoutToken(queryObject(request)), null) : {};
      const context = new HandlerContext(params, query, undefined, principal, requestId, resources, request);
      const socket: WebSocketHandler = await (route.websocket as NonNullable<Route['websocket']>)(context as RouteContext<unknown, unknown, undefined>);
      logger.info({ requestId, path: request.path, route: route.path }, 'websocket accepted');
      // Each socket's end is logged with its code: an abnormal close (1006) says which one.
      const onClose = socket.onClose.bind(socket);
      socket.onClose = (code, reason) => {
        logger.info({ requestId, path: request.path, code, reason }, 'websocket closed');
        onClose(code, reason);
      };
      return socket;
    } catch (err) {
      const reply = errorReply(err, requestId, request);
      reply.headers['x-request-id'] = requestId;
      logger.info({ requestId, path: request.path, status: reply.status }, 'websocket refused');
      return reply;
    }
  };

  async function dispatch(route: Route, rawParams: Record<string, string>, request: HttpRequest, requestId: string): Promise<HttpReply> {
    // A known key is cached: authenticated without a promise.
    const known = authenticate(route, request);
    const principal = known instanceof Promise ? await known : known;
    const params = route.params ? parseInput(route.params, rawParams, null) : rawParams;
    const query = route.query ? parseInput(route.query, queryObject(request), null) : {};
    const body = route.body ? parseInput(route.body, await readJson(request), null) : undefined;
    const result = await route.handler(new HandlerContext(params, query, body, principal, requestId, resources, request));
    return toReply(result, route.response.status);
  }

  function authenticate(route: Route, request: HttpRequest, queryToken: string | null = null): Principal | Promise<Principal> {
    switch (route.auth) {
      case 'none':
        return NO_PRINCIPAL;
      case 'metrics':
        if (config.metricsPublic) return NO_PRINCIPAL;
        requireAdmin(request);
        return NO_PRINCIPAL;
      case 'admin':
        requireAdmin(request);
        return NO_PRINCIPAL;
      case 'key-or-agent':
      case 'key': {
        const token = bearer(request) ?? queryToken;
        if (!token) {
          throw new TroupeError('missing_api_key', 'Missing API key. Send it as "Authorization: Bearer sk-troupe-...".');
        }
        if (route.auth === 'key-or-agent') return agentOrKey(token);
        const principal = resources.projects.authenticate(token);
        return principal instanceof Promise ? principal.then(knownKey) : knownKey(principal);
      }
    }
  }

  async function agentOrKey(token: string): Promise<Principal> {
    const agent = await agentPrincipal(token);
    return agent ?? knownKey(await resources.projects.authenticate(token));
  }

  async function agentPrincipal(token: string): Promise<Principal | null> {
    const { apiKey, apiSecret } = config.livekit;
    if (!apiKey || !apiSecret) return null;
    const grant = await verifyAgentToken({ apiKey, apiSecret }, token);
    return grant && { projectId: grant.projectId, keyId: `agent:${grant.characterId}`, agent: { roomId: grant.roomId, characterId: grant.characterId } };
  }

  function requireAdmin(request: HttpRequest): void {
    if (!config.adminToken) {
      // Without an admin token the admin API does not exist, so it answers like any unknown route.
      throw new TroupeError('route_not_found', `No route matches ${request.method} ${request.path}; set TROUPE_ADMIN_TOKEN to enable the admin API.`);
    }
    const token = bearer(request);
    if (!token || !safeEqual(token, config.adminToken)) {
      throw new TroupeError('invalid_admin_token', 'Missing or invalid admin token. Send TROUPE_ADMIN_TOKEN as "Authorization: Bearer <token>".');
    }
  }

  async function readJson(request: HttpRequest): Promise<unknown> {
    const bytes = await readBody(request, config.maxJsonBodyBytes);
    if (bytes.length === 0) return {};
    const type = request.headers['content-type'];
    if (type && !/^application\/([a-z.+-]*\+)?json\b/i.test(type)) {
      throw new TroupeError('unsupported_media_type', `Send the body as application/json (got ${type}).`);
    }
    // The one text rule (src/input/text.ts): what is stored is exactly what was sent.
    const text = decodeUtf8(bytes);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new TroupeError('invalid_json', `The body is not valid JSON: ${(err as Error).message}`, { detailCode: 'invalid_json' });
    }
    checkText(value);
    return value;
  }

  function errorReply(err: unknown, requestId: string, request: HttpRequest): BufferedReply {
    const mapped = toErrorBody(err, requestId);
    if (mapped.status >= 500) {
      logger.error({ err, requestId, method: request.method, path: request.path }, 'request failed');
    }
    return {
      status: mapped.status,
      headers: { 'content-type': JSON_TYPE, ...mapped.headers },
      body: JSON.stringify(mapped.body),
      closeConnection: err instanceof TroupeError && err.code === 'payload_too_large',
    };
  }

  return { handler, upgrade, router };
}

/**
 * A route's context. A class, not an object literal with `get signal()`: a getter in a literal
 * is a new closure each time, so every request made a hidden class of its own holding the
 * request, which the map transition tree kept alive through every young collection; each
 * request's objects (about 1.6 KB on a cached GET, 11 KB on a /v1 stream) were promoted and left
 * to the old generation's collections. `signal` stays lazy: most routes never need one.
 */
class HandlerContext implements RouteContext<unknown, unknown, unknown> {
  readonly params: unknown;
  readonly query: unknown;
  readonly body: unknown;
  readonly principal: Principal;
  readonly requestId: string;
  readonly resources: Resources;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly #request: HttpRequest;

  constructor(params: unknown, query: unknown, body: unknown, principal: Principal, requestId: string, resources: Resources, request: HttpRequest) {
    this.params = params;
    this.query = query;
    this.body = body;
    this.principal = principal;
    this.requestId = requestId;
    this.resources = resources;
    this.path = request.path;
    this.headers = request.headers;
    this.#request = request;
  }

  get signal(): AbortSignal {
    return this.#request.signal;
  }

  get rawBody(): AsyncIterable<Uint8Array> {
    return this.#request.body;
  }
}

/** Query parameters under the same text rule as bodies (URLSearchParams already decoded them). */
function queryObject(request: HttpRequest): Record<string, string> {
  // URLSearchParams turns bad percent-encoded UTF-8 into U+FFFD; decode strictly first.
  if (request.rawQuery.includes('%')) checkPercentEncoding(request.rawQuery);
  const values = Object.fromEntries(request.query);
  checkText(values);
  return values;
}

function withoutToken(query: Record<string, string>): Record<string, string> {
  const { token: _token, ...rest } = query;
  return rest;
}

function toReply(result: RouteResult, defaultStatus: number): HttpReply {
  const status = result.status ?? defaultStatus;
  if (result.stream) return { status, headers: { ...result.headers }, stream: result.stream };
  if (result.raw) {
    return { status, headers: { 'content-type': result.raw.contentType, ...result.headers }, body: result.raw.text };
  }
  return { status, headers: { 'content-type': JSON_TYPE, ...result.headers }, body: toJson(result.body) };
}

/** Serialised forms of frozen bodies: cached reads (characters, keys) return the same frozen object until it changes. */
const frozenJson = new WeakMap<object, string>();

function toJson(body: unknown): string {
  if (typeof body !== 'object' || body === null || !Object.isFrozen(body)) return JSON.stringify(body);
  let text = frozenJson.get(body);
  if (text === undefined) {
    text = JSON.stringify(body);
    frozenJson.set(body, text);
  }
  return text;
}

function knownKey(principal: Principal | null): Principal {
  if (!principal) throw new TroupeError('invalid_api_key', 'Invalid or revoked API key.');
  return principal;
}

function bearer(request: HttpRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
