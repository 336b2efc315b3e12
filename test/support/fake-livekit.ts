import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AccessToken, TokenVerifier, type ClaimGrants, type VideoGrant } from 'livekit-server-sdk';

/**
 * A LiveKit server's API for tests, since no real one can run here: a node:http server on an
 * ephemeral port that answers LiveKit's Twirp JSON (`POST /twirp/livekit.<Service>/<Method>`) for
 * rooms, participants and agent dispatches. Like LiveKit it checks each call's bearer JWT
 * (signature, expiry) and the grant the call needs, keeps the state those calls change, and
 * answers camelCase protobuf JSON with defaults left out. Media is out of scope:
 * `addParticipant` stands in for a client joining with a token.
 */
export interface FakeLiveKit {
  /** What clients connect to (LIVEKIT_URL); the API is the same host over http. */
  readonly url: string;
  readonly apiKey: string;
  readonly apiSecret: string;
  /** Every request that reached a Twirp route, in order, failed ones included. */
  readonly calls: FakeLiveKitCall[];
  readonly rooms: ReadonlyMap<string, FakeRoom>;
  readonly dispatches: ReadonlyMap<string, FakeDispatch>;
  /** The next `times` authorised calls answer this Twirp error (default: 500 `internal`). */
  failNext(error?: { code?: TwirpCode; msg?: string }, times?: number): void;
  /** The next `times` authorised calls are accepted and never answered (timeouts). */
  hangNext(times?: number): void;
  /** Resolves with the first call (already made or still to come) that matches. */
  waitForCall(method: string, match?: (call: FakeLiveKitCall) => boolean): Promise<FakeLiveKitCall>;
  /** A client joined the room (created as LiveKit does when a token's room does not exist yet). */
  addParticipant(room: string, identity: string, options?: { name?: string; kind?: ParticipantKind }): FakeParticipant;
  /** The `Authorization` value LiveKit sends with a webhook of this exact body. */
  signWebhook(body: string, options?: { apiKey?: string; apiSecret?: string }): Promise<string>;
  /** A webhook as LiveKit posts it for the room (and participant) in this fake's state. */
  webhook(event: string, room: string, participant?: string): Promise<{ body: string; authorization: string; contentType: string }>;
  close(): Promise<void>;
}

export interface FakeLiveKitCall {
  service: string;
  method: string;
  body: Record<string, unknown>;
  /** The verified claims of the bearer token; null when it was missing or did not verify. */
  grants: ClaimGrants | null;
}

export type TwirpCode = 'internal' | 'not_found' | 'unavailable' | 'permission_denied' | 'unauthenticated' | 'invalid_argument' | 'already_exists' | 'resource_exhausted' | 'deadline_exceeded';
export type ParticipantKind = 'STANDARD' | 'AGENT' | 'SIP' | 'INGRESS' | 'EGRESS';

export interface FakeRoom {
  sid: string;
  name: string;
  metadata: string;
  creationTime: number;
  participants: Map<string, FakeParticipant>;
}

export interface FakeParticipant {
  sid: string;
  identity: string;
  name: string;
  kind: ParticipantKind;
  joinedAt: number;
}

export interface FakeDispatch {
  id: string;
  agentName: string;
  room: string;
  metadata: string;
  createdAtNs: bigint;
}

/** Twirp's HTTP status for each error code (twirp.ServerHTTPStatusFromErrorCode). */
const TWIRP_STATUS: Record<TwirpCode | 'bad_route' | 'malformed', number> = {
  internal: 500,
  not_found: 404,
  unavailable: 503,
  permission_denied: 403,
  unauthenticated: 401,
  invalid_argument: 400,
  already_exists: 409,
  resource_exhausted: 429,
  deadline_exceeded: 408,
  bad_route: 404,
  malformed: 400,
};

class TwirpFailure extends Error {
  readonly code: keyof typeof TWIRP_STATUS;

  constructor(code: keyof typeof TWIRP_STATUS, msg: string) {
    super(msg);
    this.code = code;
  }
}

type Handler = (body: Record<string, unknown>) => unknown;

export async function startFakeLiveKit(options: { apiKey?: string; apiSecret?: string } = {}): Promise<FakeLiveKit> {
  const apiKey = options.apiKey ?? 'fake-api-key';
  const apiSecret = options.apiSecret ?? 'fake-api-secret-of-at-least-32-characters';
  const verifier = new TokenVerifier(apiKey, apiSecret);
  const calls: FakeLiveKitCall[] = [];
  const waiters = new Set<(call: FakeLiveKitCall) => void>();
  const faults: ({ kind: 'error'; code: TwirpCode; msg: string } | { kind: 'hang' })[] = [];
  const rooms = new Map<string, FakeRoom>();
  const dispatches = new Map<string, FakeDispatch>();

  const ensureRoom = (name: string, metadata = ''): FakeRoom => {
    let room = rooms.get(name);
    if (!room) {
      room = { sid: liveKitId('RM_'), name, metadata, creationTime: nowS(), participants: new Map() };
      rooms.set(name, room);
    }
    return room;
  };
  const existingRoom = (name: string): FakeRoom => {
    const room = rooms.get(name);
    if (!room) throw new TwirpFailure('not_found', 'requested room does not exist');
    return room;
  };

  // Each method with the grant LiveKit checks before running it.
  const routes: Record<string, { needs: (grant: VideoGrant, body: Record<string, unknown>) => boolean; run: Handler }> = {
    'RoomService/CreateRoom': {
      needs: (g) => g.roomCreate === true,
      run: (body) => {
        const name = requireString(body, 'name');
        return roomJson(ensureRoom(name, typeof body.metadata === 'string' ? body.metadata : ''));
      },
    },
    'RoomService/DeleteRoom': {
      needs: (g) => g.roomCreate === true,
      run: (body) => {
        const room = existingRoom(requireString(body, 'room'));
        rooms.delete(room.name);
        for (const [id, d] of dispatches) if (d.room === room.name) dispatches.delete(id);
        return {};
      },
    },
    'RoomService/ListRooms': {
      needs: (g) => g.roomList === true,
      run: (body) => {
        const names = Array.isArray(body.names) ? body.names : [];
        return { rooms: [...rooms.values()].filter((r) => names.length === 0 || names.includes(r.name)).map(roomJson) };
      },
    },
    'RoomService/ListParticipants': {
      needs: roomAdminOf,
      run: (body) => ({ participants: [...existingRoom(requireString(body, 'room')).participants.values()].map(participantJson) }),
    },
    'RoomService/RemoveParticipant': {
      needs: roomAdminOf,
      run: (body) => {
        const room = existingRoom(requireString(body, 'room'));
        const identity = requireString(body, 'identity');
        if (!room.participants.delete(identity)) throw new TwirpFailure('not_found', 'participant not found');
        return {};
      },
    },
    'AgentDispatchService/CreateDispatch': {
      needs: roomAdminOf,
      run: (body) => {
        // LiveKit creates the room a dispatch names when it does not exist yet.
        const room = ensureRoom(requireString(body, 'room'));
        const dispatch: FakeDispatch = {
          id: liveKitId('AD_'),
          agentName: typeof body.agentName === 'string' ? body.agentName : '',
          room: room.name,
          metadata: typeof body.metadata === 'string' ? body.metadata : '',
          createdAtNs: BigInt(Date.now()) * 1_000_000n,
        };
        dispatches.set(dispatch.id, dispatch);
        return dispatchJson(dispatch);
      },
    },
    'AgentDispatchService/DeleteDispatch': {
      needs: roomAdminOf,
      run: (body) => {
        const dispatch = dispatches.get(requireString(body, 'dispatchId'));
        if (!dispatch || dispatch.room !== body.room) throw new TwirpFailure('not_found', 'dispatch not found');
        dispatches.delete(dispatch.id);
        return dispatchJson(dispatch);
      },
    },
    'AgentDispatchService/ListDispatch': {
      needs: roomAdminOf,
      run: (body) => {
        const room = requireString(body, 'room');
        const list = [...dispatches.values()].filter((d) => d.room === room && (!body.dispatchId || d.id === body.dispatchId));
        return { agentDispatches: list.map(dispatchJson) };
      },
    },
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const route = /^\/twirp\/livekit\.([A-Za-z]+)\/([A-Za-z]+)$/.exec(req.url ?? '');
    const raw = await readBody(req);
    if (!route || req.method !== 'POST') {
      return sendError(res, new TwirpFailure('bad_route', `no handler for path "${req.url ?? ''}"`));
    }
    const [, service = '', method = ''] = route;
    let body: Record<string, unknown>;
    try {
      body = (raw ? JSON.parse(raw) : {}) as Record<string, unknown>;
    } catch {
      return sendError(res, new TwirpFailure('malformed', 'the json request could not be decoded'));
    }
    const grants = await verify(req.headers.authorization);
    const call: FakeLiveKitCall = { service, method, body, grants };
    calls.push(call);
    for (const waiter of [...waiters]) waiter(call);

    const target = routes[`${service}/${method}`];
    if (!target) return sendError(res, new TwirpFailure('bad_route', `no handler for path "${req.url ?? ''}"`));
    if (!grants) return sendError(res, new TwirpFailure('unauthenticated', 'invalid token'));
    if (!target.needs(grants.video ?? {}, body)) return sendError(res, new TwirpFailure('permission_denied', 'permissions denied'));
    const fault = faults.shift();
    if (fault?.kind === 'hang') return; // held open until the client gives up or close()
    if (fault) return sendError(res, new TwirpFailure(fault.code, fault.msg));
    try {
      sendJson(res, 200, target.run(body));
    } catch (err) {
      if (err instanceof TwirpFailure) return sendError(res, err);
      throw err;
    }
  };

  const verify = async (header: string | undefined): Promise<ClaimGrants | null> => {
    const token = /^Bearer (.+)$/.exec(header ?? '')?.[1];
    if (!token) return null;
    try {
      return await verifier.verify(token);
    } catch {
      return null;
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => sendError(res, new TwirpFailure('internal', String(err))));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  const signWebhook: FakeLiveKit['signWebhook'] = async (body, signing = {}) => {
    // As LiveKit's server does: a short-lived token of the API key whose sha256 claim is the
    // base64 SHA-256 of the exact body, sent bare (no scheme) in Authorization.
    const token = new AccessToken(signing.apiKey ?? apiKey, signing.apiSecret ?? apiSecret, { ttl: '5m' });
    token.sha256 = createHash('sha256').update(body).digest('base64');
    return token.toJwt();
  };

  return {
    url: `ws://127.0.0.1:${port}`,
    apiKey,
    apiSecret,
    calls,
    rooms,
    dispatches,
    failNext(error = {}, times = 1) {
      for (let i = 0; i < times; i++) faults.push({ kind: 'error', code: error.code ?? 'internal', msg: error.msg ?? 'fake LiveKit failure' });
    },
    hangNext(times = 1) {
      for (let i = 0; i < times; i++) faults.push({ kind: 'hang' });
    },
    waitForCall(method, match = () => true) {
      const found = calls.find((c) => c.method === method && match(c));
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => {
        const waiter = (call: FakeLiveKitCall) => {
          if (call.method !== method || !match(call)) return;
          waiters.delete(waiter);
          resolve(call);
        };
        waiters.add(waiter);
      });
    },
    addParticipant(roomName, identity, participant = {}) {
      const joined: FakeParticipant = { sid: liveKitId('PA_'), identity, name: participant.name ?? '', kind: participant.kind ?? 'STANDARD', joinedAt: nowS() };
      ensureRoom(roomName).participants.set(identity, joined);
      return joined;
    },
    signWebhook,
    async webhook(event, roomName, identity) {
      const room = rooms.get(roomName) ?? { sid: liveKitId('RM_'), name: roomName, metadata: '', creationTime: nowS(), participants: new Map() };
      const participant = identity === undefined ? undefined : (room.participants.get(identity) ?? { sid: liveKitId('PA_'), identity, name: '', kind: 'STANDARD', joinedAt: nowS() });
      const body = JSON.stringify({
        event,
        room: roomJson(room),
        ...(participant ? { participant: participantJson(participant) } : {}),
        id: liveKitId('EV_'),
        createdAt: String(nowS()),
      });
      return { body, authorization: await signWebhook(body), contentType: 'application/webhook+json' };
    },
    async close() {
      server.closeAllConnections();
      if (server.listening) await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Room admin of the very room the request names, as LiveKit requires for per-room calls. */
function roomAdminOf(grant: VideoGrant, body: Record<string, unknown>): boolean {
  return grant.roomAdmin === true && typeof body.room === 'string' && grant.room === body.room;
}

function requireString(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '') throw new TwirpFailure('invalid_argument', `${field} is required`);
  return value;
}

// protobuf JSON as LiveKit emits it: camelCase, int64 as strings, enums by name, defaults left out.
function roomJson(room: FakeRoom): Record<string, unknown> {
  return {
    sid: room.sid,
    name: room.name,
    emptyTimeout: 300,
    departureTimeout: 20,
    creationTime: String(room.creationTime),
    creationTimeMs: String(room.creationTime * 1000),
    enabledCodecs: [{ mime: 'audio/opus' }, { mime: 'video/VP8' }, { mime: 'video/H264' }],
    ...(room.metadata ? { metadata: room.metadata } : {}),
    ...(room.participants.size > 0 ? { numParticipants: room.participants.size } : {}),
  };
}

function participantJson(p: FakeParticipant): Record<string, unknown> {
  return {
    sid: p.sid,
    identity: p.identity,
    state: 'ACTIVE',
    joinedAt: String(p.joinedAt),
    joinedAtMs: String(p.joinedAt * 1000),
    ...(p.name ? { name: p.name } : {}),
    version: 2,
    permission: { canSubscribe: true, canPublish: true, canPublishData: true, canPublishSources: ['MICROPHONE'] },
    ...(p.kind === 'STANDARD' ? {} : { kind: p.kind }),
  };
}

function dispatchJson(d: FakeDispatch): Record<string, unknown> {
  return {
    id: d.id,
    agentName: d.agentName,
    room: d.room,
    ...(d.metadata ? { metadata: d.metadata } : {}),
    state: { createdAt: String(d.createdAtNs) },
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  // Exactly `application/json`: the SDK reads Twirp error bodies only with that content-type.
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function sendError(res: ServerResponse, failure: TwirpFailure): void {
  sendJson(res, TWIRP_STATUS[failure.code], { code: failure.code, msg: failure.message });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** LiveKit's ids: a type prefix and 12 base62 characters. */
function liveKitId(prefix: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return prefix + [...randomBytes(12)].map((b) => alphabet[b % alphabet.length]).join('');
}

function nowS(): number {
  return Math.floor(Date.now() / 1000);
}
