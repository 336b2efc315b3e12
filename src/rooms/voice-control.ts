import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { TroupeError } from '../errors.ts';
import { isId } from '../ids.ts';
import type { LiveKitControlPlane } from '../livekit/control-plane.ts';
import type { JoinToken } from '../livekit/tokens.ts';
import type { LiveKitWebhookEvent, LiveKitWebhooks } from '../livekit/webhooks.ts';
import type { StoredParticipant, StoredRoom } from './repository.ts';
import { RTC_IDENTITY_PREFIX, roomEnded, type RoomHooks, type RoomService } from './service.ts';

/** Who may join a voice room: a player's identity and display name (the token's query). */
export const JoinTokenRequestSchema = z.strictObject({
  identity: z
    .string()
    .regex(/^[A-Za-z0-9_.:@=+-]{1,128}$/, 'must be 1 to 128 letters, digits or _ . : @ = + -')
    // Characters' agents join as `agent-<characterId>`; a player under that name could impersonate one.
    .refine((id) => !id.toLowerCase().startsWith(RTC_IDENTITY_PREFIX), `identities starting with '${RTC_IDENTITY_PREFIX}' are reserved for characters`)
    .optional(),
  name: z.string().trim().min(1, 'must not be empty').max(128).optional(),
});
export type JoinTokenRequest = z.infer<typeof JoinTokenRequestSchema>;

/** A human (not a character's agent) joined or left a room's voice session, as LiveKit reported it. */
export interface HumanPresence {
  change: 'joined' | 'left';
  identity: string;
  name: string | null;
}

/** Seams for the room actor; may close over resources built after the control (called per request). */
export interface RoomVoiceHooks {
  /** After every successful start (a retried start calls it again, so it must be idempotent). */
  onStarted?(room: StoredRoom): Promise<void>;
  /** A human's `participant_joined`/`participant_left` webhook; failures are logged, not retried. */
  onHuman?(roomId: string, event: HumanPresence): Promise<void>;
}

/** What the agent job needs of its character before it joins: the name it joins as and its voice. */
export type CharacterVoiceLookup = (projectId: string, characterId: string) => Promise<{ name: string; voiceId: string | null; voiceDescription: string | null }>;

export interface RoomVoiceControlOptions {
  rooms: RoomService;
  /** The character's name and voice, for its agent's dispatch (absent: the agent joins by id, in TTS_VOICE). */
  characters?: CharacterVoiceLookup;
  livekit: LiveKitControlPlane;
  webhooks: LiveKitWebhooks;
  logger: Logger;
  hooks?: RoomVoiceHooks;
}

/** What a dispatched agent's job receives as metadata (JSON): enough to find everything else. */
export interface DispatchMetadata {
  projectId: string;
  roomId: string;
  participantId: string;
  characterId: string;
  conversationId: string;
  /** As at dispatch (a voice changed later applies from the next start). */
  characterName?: string;
  voiceId?: string | null;
  voiceDescription?: string | null;
}

/**
 * The LiveKit side of rooms: join tokens, start (one agent dispatch per participant), agents
 * following membership, and LiveKit's webhooks. The LiveKit room name is the Troupe room id.
 *
 * Every LiveKit call comes before the change it stands for, so a failed call (502) changes
 * nothing and can be retried: a room is marked started once LiveKit took all dispatches, a
 * participant leaves or a room ends once its agents are withdrawn, and an add whose dispatch
 * fails is undone by RoomService. Work on one room is serialized in this process, so a start
 * and an add cannot both miss (or both dispatch) a participant; across processes, a dispatch
 * made by an earlier start attempt is adopted from LiveKit's list rather than made again.
 */
export class RoomVoiceControl {
  readonly #rooms: RoomService;
  readonly #livekit: LiveKitControlPlane;
  readonly #webhooks: LiveKitWebhooks;
  readonly #logger: Logger;
  readonly #hooks: RoomVoiceHooks;
  readonly #characters: CharacterVoiceLookup | undefined;
  /** Per room id, the tail of the work queued on it. */
  readonly #queues = new Map<string, Promise<void>>();

  constructor(options: RoomVoiceControlOptions) {
    this.#rooms = options.rooms;
    this.#livekit = options.livekit;
    this.#webhooks = options.webhooks;
    this.#logger = options.logger;
    this.#hooks = options.hooks ?? {};
    this.#characters = options.characters;
  }

  /** A player's token to join the room's voice session; without an identity, a fresh `user-…` one. */
  async token(projectId: string, roomId: string, request: JoinTokenRequest): Promise<JoinToken> {
    const room = await this.#rooms.find(projectId, roomId);
    if (room.endedAt) throw roomEnded(room, 'takes no more players');
    const identity = request.identity ?? `user-${randomBytes(8).toString('hex')}`;
    return this.#livekit.joinToken(room.id, identity, request.name);
  }

  /**
   * Creates the LiveKit room and dispatches an agent for every participant that has none, then
   * marks the room started. Idempotent: a second start dispatches nobody twice, and a start that
   * failed half-way completes the rest.
   */
  async start(projectId: string, roomId: string): Promise<{ started: true }> {
    const room = await this.#serial(roomId, async () => {
      const startable = await this.#rooms.findStartable(projectId, roomId);
      await this.#livekit.createRoom(roomId, { projectId, roomId });
      const pending = startable.participants.filter((p) => p.leftAt === null && p.dispatchId === null);
      const earlier = pending.length > 0 ? await this.#earlierDispatches(roomId) : new Map<string, string>();
      for (const participant of pending) {
        const adopted = earlier.get(participant.id);
        if (adopted) await this.#rooms.setDispatchId(participant.id, adopted);
        else await this.#dispatch(startable, participant);
      }
      return (await this.#rooms.markStarted(projectId, roomId)).room;
    });
    await this.#hooks.onStarted?.(room);
    return { started: true };
  }

  /** RoomHooks: a participant added to a started room gets its agent at once. */
  async participantAdded(room: StoredRoom, participant: StoredParticipant): Promise<void> {
    if (!this.#livekit.configured) return;
    await this.#serial(room.id, async () => {
      // Read again under the queue: a start may have run since the add read the room.
      const current = await this.#rooms.find(room.projectId, room.id);
      const added = current.participants.find((p) => p.id === participant.id);
      if (!current.startedAt || current.endedAt || !added || added.leftAt !== null || added.dispatchId !== null) return;
      await this.#dispatch(current, added);
    });
  }

  /** RoomHooks: before a participant leaves, its agent is withdrawn from LiveKit. */
  async participantLeaving(room: StoredRoom, participant: StoredParticipant): Promise<void> {
    if (!this.#livekit.configured) return;
    await this.#serial(room.id, async () => {
      const current = await this.#rooms.find(room.projectId, room.id);
      await this.#withdraw(room.id, current.participants.find((p) => p.id === participant.id) ?? participant);
    });
  }

  /** RoomHooks: before a room ends, its agents are withdrawn and its LiveKit room deleted. */
  async ending(room: StoredRoom): Promise<void> {
    if (!this.#livekit.configured) return;
    await this.#serial(room.id, async () => {
      const current = await this.#rooms.find(room.projectId, room.id);
      const dispatched = current.participants.filter((p) => p.dispatchId !== null);
      for (const participant of dispatched) await this.#withdraw(room.id, participant);
      if (current.startedAt || dispatched.length > 0) await this.#livekit.deleteRoom(room.id);
    });
  }

  /**
   * RoomHooks: after a room ended, withdraws an agent dispatched between `ending` and the end
   * (an add that raced it). Best effort: the room has ended whatever LiveKit answers.
   */
  async ended(room: StoredRoom): Promise<void> {
    if (!this.#livekit.configured) return;
    try {
      await this.#serial(room.id, async () => {
        const stray = (await this.#rooms.find(room.projectId, room.id)).participants.filter((p) => p.dispatchId !== null);
        if (stray.length === 0) return;
        for (const participant of stray) await this.#withdraw(room.id, participant);
        await this.#livekit.deleteRoom(room.id);
      });
    } catch (err) {
      this.#logger.error({ err, roomId: room.id }, 'could not withdraw a late agent from an ended room');
    }
  }

  /**
   * Handles a LiveKit webhook (`body` exactly as received): 401 unless LiveKit signed it.
   * Events of rooms Troupe does not know are ignored (answering an error makes LiveKit retry).
   */
  async receiveWebhook(body: string, authorization: string | undefined): Promise<void> {
    const event = await this.#webhooks.receive(body, authorization);
    const roomId = event.room?.name ?? '';
    const room = isId('room', roomId) ? await this.#rooms.findById(roomId) : undefined;
    if (!room) {
      this.#logger.debug({ event: event.event, room: roomId }, 'livekit webhook for an unknown room ignored');
      return;
    }
    switch (event.event) {
      case 'room_finished':
        return this.#finished(room);
      case 'participant_joined':
        return this.#human(room, event, 'joined');
      case 'participant_left':
        return this.#human(room, event, 'left');
    }
  }

  /** LiveKit closed the room (everyone left, or it was deleted): the Troupe room ends too. */
  async #finished(room: StoredRoom): Promise<void> {
    if (room.endedAt) return;
    try {
      await this.#rooms.end(room.projectId, room.id);
      this.#logger.info({ roomId: room.id }, 'room ended by livekit room_finished');
    } catch (err) {
      // Ended by another request meanwhile: the outcome LiveKit asked for.
      if (!(err instanceof TroupeError && err.detailCode === 'room_ended')) throw err;
    }
  }

  async #human(room: StoredRoom, event: LiveKitWebhookEvent, change: HumanPresence['change']): Promise<void> {
    const participant = event.participant;
    if (!participant || participant.identity.startsWith(RTC_IDENTITY_PREFIX) || participant.kind === 'agent' || room.endedAt) return;
    this.#logger.info({ roomId: room.id, identity: participant.identity, change }, 'voice room human presence');
    try {
      await this.#hooks.onHuman?.(room.id, { change, identity: participant.identity, name: participant.name || null });
    } catch (err) {
      this.#logger.error({ err, roomId: room.id }, 'room voice onHuman hook failed');
    }
  }

  /** Dispatches the participant's agent and stores its id; a dispatch whose id cannot be stored is withdrawn. */
  async #dispatch(room: StoredRoom, participant: StoredParticipant): Promise<void> {
    const metadata: DispatchMetadata = {
      projectId: room.projectId,
      roomId: room.id,
      participantId: participant.id,
      characterId: participant.characterId,
      conversationId: participant.conversationId,
    };
    const character = await this.#characters?.(room.projectId, participant.characterId).catch(() => null);
    if (character) Object.assign(metadata, { characterName: character.name, voiceId: character.voiceId, voiceDescription: character.voiceDescription });
    const dispatchId = await this.#livekit.dispatchAgent(room.id, metadata);
    try {
      await this.#rooms.setDispatchId(participant.id, dispatchId);
    } catch (err) {
      await this.#livekit.deleteDispatch(dispatchId, room.id).catch((cleanup: unknown) => {
        this.#logger.error({ err: cleanup, roomId: room.id, dispatchId }, 'could not withdraw an unrecorded dispatch');
      });
      throw err;
    }
  }

  /** Deletes the participant's dispatch first (so no new job starts), then disconnects its agent. */
  async #withdraw(roomId: string, participant: StoredParticipant): Promise<void> {
    if (participant.dispatchId === null) return;
    await this.#livekit.deleteDispatch(participant.dispatchId, roomId);
    await this.#livekit.removeParticipant(roomId, participant.rtcIdentity);
    await this.#rooms.setDispatchId(participant.id, null);
  }

  /** participantId -> dispatch id of dispatches made for the room before (ids a failed start did not store). */
  async #earlierDispatches(roomId: string): Promise<Map<string, string>> {
    const byParticipant = new Map<string, string>();
    for (const dispatch of await this.#livekit.listDispatches(roomId)) {
      const participantId = participantOf(dispatch.metadata);
      if (participantId) byParticipant.set(participantId, dispatch.id);
    }
    return byParticipant;
  }

  /** Runs `work` after the work already queued on the room in this process. */
  async #serial<T>(roomId: string, work: () => Promise<T>): Promise<T> {
    const result = (this.#queues.get(roomId) ?? Promise.resolve()).then(work);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(roomId, tail);
    try {
      return await result;
    } finally {
      if (this.#queues.get(roomId) === tail) this.#queues.delete(roomId);
    }
  }
}

/** RoomService's hooks, run by a control built after the service (it needs the service). */
export function roomVoiceHooks(voice: () => RoomVoiceControl): RoomHooks {
  return {
    participantAdded: (room, participant) => voice().participantAdded(room, participant),
    participantLeaving: (room, participant) => voice().participantLeaving(room, participant),
    ending: (room) => voice().ending(room),
    ended: (room) => voice().ended(room),
  };
}

function participantOf(metadata: string): string | null {
  try {
    const parsed: unknown = JSON.parse(metadata);
    const id = (parsed as Partial<DispatchMetadata> | null)?.participantId;
    return typeof id === 'string' ? id : null;
  } catch {
    return null; // another tool's dispatch in the same room
  }
}
