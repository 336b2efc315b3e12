import { AgentDispatchClient, RoomServiceClient, ServerError } from 'livekit-server-sdk';
import type { LiveKitConfig } from '../config.ts';
import { TroupeError } from '../errors.ts';
import { apiBaseUrl, missingVariables, notConfigured, type LiveKitCredentials } from './credentials.ts';
import { toDispatch, toParticipant, toRoom, type LiveKitDispatch, type LiveKitParticipant, type LiveKitRoom } from './shapes.ts';
import { signJoinToken, type JoinToken } from './tokens.ts';

/** Bound of one LiveKit API call (connect, answer and body), in ms. */
const LIVEKIT_REQUEST_TIMEOUT_MS = 10_000;

/** LiveKit's own messages can be whole HTML pages (a proxy's error); keep what fits in an error. */
const MAX_UPSTREAM_MESSAGE_CHARS = 300;

export interface LiveKitControlPlaneOptions {
  config: LiveKitConfig;
  /** Overrides LIVEKIT_REQUEST_TIMEOUT_MS (tests). */
  requestTimeoutMs?: number;
}

interface Clients {
  credentials: LiveKitCredentials;
  rooms: RoomServiceClient;
  dispatch: AgentDispatchClient;
}

/**
 * Troupe's side of LiveKit for voice rooms: signs players' join tokens and creates rooms, agent
 * dispatches and removals through LiveKit's server API. Every failure is a TroupeError: 503
 * `livekit_not_configured` without LIVEKIT_URL/KEY/SECRET, 502 `livekit_error` when LiveKit
 * fails, refuses or does not answer in time.
 */
export class LiveKitControlPlane {
  readonly #config: LiveKitConfig;
  readonly #clients: Clients | null;
  readonly #timeoutMs: number;

  constructor(options: LiveKitControlPlaneOptions) {
    this.#config = options.config;
    this.#timeoutMs = options.requestTimeoutMs ?? LIVEKIT_REQUEST_TIMEOUT_MS;
    const { url, apiKey, apiSecret } = options.config;
    if (!url || !apiKey || !apiSecret) {
      this.#clients = null;
      return;
    }
    const host = apiBaseUrl(url);
    // One attempt per call: the SDK's region failover (LiveKit Cloud only) would stretch the
    // bound threefold and could replay a CreateDispatch, which dispatches the agent again.
    const clientOptions = { requestTimeout: this.#timeoutMs / 1000, failover: false };
    this.#clients = {
      credentials: { url, apiKey, apiSecret },
      rooms: new RoomServiceClient(host, apiKey, apiSecret, clientOptions),
      dispatch: new AgentDispatchClient(host, apiKey, apiSecret, clientOptions),
    };
  }

  get configured(): boolean {
    return this.#clients !== null;
  }

  /** A token for one player to join `roomName` with a microphone; signed here, LiveKit is not called. */
  async joinToken(roomName: string, identity: string, name?: string): Promise<JoinToken> {
    const { credentials } = this.#require();
    return signJoinToken(credentials, { roomName, identity, name, ttlS: this.#config.tokenTtlS });
  }

  /** Creates the room, or returns it when it exists already (LiveKit's CreateRoom is idempotent). */
  async createRoom(roomName: string, metadata?: object): Promise<LiveKitRoom> {
    const { rooms } = this.#require();
    const room = await this.#call('CreateRoom', () =>
      rooms.createRoom({ name: roomName, ...(metadata === undefined ? {} : { metadata: JSON.stringify(metadata) }) }),
    );
    return toRoom(room);
  }

  /** Ends the room for everyone in it; a room LiveKit does not know counts as deleted. */
  async deleteRoom(roomName: string): Promise<void> {
    const { rooms } = this.#require();
    await this.#call('DeleteRoom', () => rooms.deleteRoom(roomName), { notFound: undefined });
  }

  /**
   * Asks LiveKit to send the LIVEKIT_AGENT_NAME worker into the room; `metadata` reaches the job
   * as JSON. Each call dispatches once more, so check `listDispatches` before retrying.
   * @returns the dispatch id
   */
  async dispatchAgent(roomName: string, metadata: object): Promise<string> {
    const { dispatch } = this.#require();
    const created = await this.#call('CreateDispatch', () =>
      dispatch.createDispatch(roomName, this.#config.agentName, { metadata: JSON.stringify(metadata) }),
    );
    if (!created.id) throw new TroupeError('livekit_error', 'LiveKit CreateDispatch answered without a dispatch id.');
    return created.id;
  }

  /** The room's agent dispatches (of any agent name). */
  async listDispatches(roomName: string): Promise<LiveKitDispatch[]> {
    const { dispatch } = this.#require();
    const list = await this.#call('ListDispatch', () => dispatch.listDispatch(roomName));
    return list.map(toDispatch);
  }

  /** Withdraws a dispatch; one LiveKit does not know (or a room that is gone) counts as deleted. */
  async deleteDispatch(dispatchId: string, roomName: string): Promise<void> {
    const { dispatch } = this.#require();
    await this.#call('DeleteDispatch', () => dispatch.deleteDispatch(dispatchId, roomName), { notFound: undefined });
  }

  async listParticipants(roomName: string): Promise<LiveKitParticipant[]> {
    const { rooms } = this.#require();
    const list = await this.#call('ListParticipants', () => rooms.listParticipants(roomName));
    return list.map(toParticipant);
  }

  /** Disconnects a participant; one LiveKit does not know (never joined, already left) counts as removed. */
  async removeParticipant(roomName: string, identity: string): Promise<void> {
    const { rooms } = this.#require();
    await this.#call('RemoveParticipant', () => rooms.removeParticipant(roomName, identity), { notFound: undefined });
  }

  #require(): Clients {
    if (!this.#clients) throw notConfigured(missingVariables(this.#config));
    return this.#clients;
  }

  /** Runs one SDK call; with `notFound`, LiveKit's not_found answers that value instead of failing. */
  async #call<T>(method: string, run: () => Promise<T>, options?: { notFound: T }): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (options && 'notFound' in options && isNotFound(err)) return options.notFound;
      throw this.#failure(method, err);
    }
  }

  #failure(method: string, err: unknown): TroupeError {
    if (err instanceof TroupeError) return err;
    const where = this.#clients ? new URL(apiBaseUrl(this.#clients.credentials.url)).host : 'LIVEKIT_URL';
    if (err instanceof ServerError) {
      const reason = err.code ?? `HTTP ${err.status}`;
      return new TroupeError('livekit_error', `LiveKit ${method} failed (${reason}): ${clip(err.message)}`, { cause: err });
    }
    if (err instanceof Error && err.name === 'TimeoutError') {
      return new TroupeError('livekit_error', `LiveKit at ${where} did not answer ${method} within ${this.#timeoutMs} ms.`, {
        cause: err,
        detailCode: 'livekit_timeout',
      });
    }
    const network = networkCode(err);
    if (network) {
      return new TroupeError('livekit_error', `LiveKit at ${where} is unreachable (${network}); check LIVEKIT_URL.`, {
        cause: err,
        detailCode: 'livekit_unreachable',
      });
    }
    // Anything else: an answer the SDK could not read, or an SDK bug.
    const message = err instanceof Error ? err.message : String(err);
    return new TroupeError('livekit_error', `LiveKit ${method} failed: ${clip(message)}`, { cause: err });
  }
}

function isNotFound(err: unknown): boolean {
  return err instanceof ServerError && (err.code === 'not_found' || err.status === 404);
}

/** fetch rejects with `TypeError: fetch failed` and the socket error (ECONNREFUSED...) as its cause. */
function networkCode(err: unknown): string | null {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code.length > 0) return code;
  }
  return err instanceof TypeError && err.message === 'fetch failed' ? 'fetch failed' : null;
}

function clip(message: string): string {
  const line = message.trim().replace(/\s+/g, ' ');
  return line.length > MAX_UPSTREAM_MESSAGE_CHARS ? `${line.slice(0, MAX_UPSTREAM_MESSAGE_CHARS)}...` : line;
}
