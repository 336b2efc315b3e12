import type { Logger } from 'pino';
import type { ClientChannel } from '../capabilities/executor.ts';
import type { CapabilityService } from '../capabilities/service.ts';
import type { Character } from '../characters/schemas.ts';
import type { CharacterService } from '../characters/service.ts';
import type { ConversationService } from '../conversations/service.ts';
import { TroupeError, toErrorEvent } from '../errors.ts';
import { newId } from '../ids.ts';
import { runCharacterTurn, type TurnDeps } from '../inference/character-turn.ts';
import type { Director, SceneLine, SceneMember } from './director.ts';
import type { RoomEvent } from './events.ts';
import type { SpokenLine, SpokenReport } from './gateway.ts';
import type { StoredParticipant, StoredRoom, TranscriptEntry } from './repository.ts';
import type { RoomService } from './service.ts';
import { heardSinceLastLine, speakerOf, witnessedHistory } from './witness.ts';

/** How many recent lines the director reads to decide. */
const DIRECTOR_LINES = 30;

export interface SceneDeps extends TurnDeps {
  rooms: RoomService;
  characters: CharacterService;
  capabilities: CapabilityService;
  conversations: ConversationService;
  director: Director;
  /** ROOM_MAX_AGENT_TURNS. */
  maxAgentTurns: number;
  logger: Logger;
}

/** Where a room's events go, and how a live client's capability results come back. */
export interface SceneOutlet {
  publish(event: RoomEvent): void;
  awaitResult?: ClientChannel['awaitResult'];
  /** The room actor's fencing token: its transcript writes are refused once another actor took over. */
  epoch?: number;
  /**
   * When the character has a voice in the room: resolves once the line has played, with what
   * was heard (null if the agent did not report in time). Null at once for a character without one.
   */
  awaitSpoken?: (characterId: string, replyId: string, text: string, signal: AbortSignal) => Promise<SpokenReport | null> | null;
}

/** How a character's turn went: whether it said anything, and whether a human cut it off. */
interface Spoke {
  said: boolean;
  interrupted: boolean;
}

/**
 * The turn loop of a room: a player's line is stored, then the director gives the floor to one
 * character at a time, each answering through the same character turn as conversations
 * (persona, retrieval, capabilities), from the transcript as it witnessed it. Ordering is the
 * room actor's job: it runs one `hear` or `play` at a time.
 */
export class RoomScene {
  readonly #deps: SceneDeps;

  constructor(deps: SceneDeps) {
    this.#deps = deps;
  }

  /**
   * A player's line, stored and published; the characters answer in `play`. `fresh` is false for
   * a retry of a line stored before (same `clientKey`): nothing is published again.
   */
  async hear(projectId: string, roomId: string, line: SpokenLine & { clientKey?: string }, outlet: SceneOutlet): Promise<{ entry: TranscriptEntry; fresh: boolean }> {
    const { entry, inserted } = await this.#deps.rooms.appendTranscriptOnce(projectId, roomId, {
      speakerType: 'user',
      characterId: null,
      speakerName: line.speakerName,
      content: line.content,
      ...(line.clientKey ? { clientKey: line.clientKey } : {}),
    }, outlet.epoch);
    if (inserted) outlet.publish({ type: 'transcript', entry });
    return { entry, fresh: inserted };
  }

  /**
   * Characters answer, one at a time, until the director gives the floor back to the humans
   * (or the turn limit does). `opening`: the room just started, nothing said yet.
   */
  async play(projectId: string, roomId: string, outlet: SceneOutlet, opening: boolean, signal: AbortSignal): Promise<void> {
    for (let first = true; ; first = false) {
      const [room, entries] = await Promise.all([this.#deps.rooms.find(projectId, roomId), this.#deps.rooms.entries(roomId)]);
      if (room.endedAt) return;
      // An opening is for a scene where nothing was said yet (a start repeated later is not one).
      if (opening && first && entries.length > 0) return;
      const members = await this.#members(projectId, room);
      const decision = await this.#deps.director.decide({
        mode: room.mode,
        roomName: room.name,
        scenePrompt: room.scenePrompt,
        members: members.map((m) => m.member),
        transcript: entries.slice(-DIRECTOR_LINES).map(toSceneLine),
        agentTurnsSinceHuman: trailingAgentLines(entries),
        maxAgentTurns: this.#deps.maxAgentTurns,
        opening: opening && first,
        signal,
      });
      if (!decision.speaker) return;
      const { characterId } = decision.speaker;
      const speaker = members.find((m) => m.member.characterId === characterId);
      if (!speaker) return;
      outlet.publish({ type: 'speaker', characterId });
      try {
        const spoke = await this.#speak(projectId, room, entries, speaker.character, members, decision.direction, outlet, signal);
        // A human who speaks over a character takes the floor: their line is heard next.
        if (!spoke.said || spoke.interrupted) return;
      } finally {
        outlet.publish({ type: 'speaker', characterId: null });
      }
    }
  }

  /** One character's line: streamed, stored in the transcript and in its own conversation. */
  async #speak(
    projectId: string,
    room: StoredRoom,
    entries: TranscriptEntry[],
    character: Character,
    members: { member: SceneMember; seat: StoredParticipant }[],
    direction: string | null,
    outlet: SceneOutlet,
    signal: AbortSignal,
  ): Promise<Spoke> {
    const replyId = newId('reply');
    const { publish } = outlet;
    try {
      const capabilities = await this.#deps.capabilities.getMany(projectId, character.capabilityGroupIds);
      const history = witnessedHistory(entries, room.participants, character.id);
      const channel: ClientChannel = {
        deliver: (call) => publish({ type: 'capability', characterId: character.id, name: call.name, params: call.params, callId: call.callId, replyId }),
        ...(outlet.awaitResult ? { awaitResult: outlet.awaitResult } : {}),
      };
      const seat = members.find((m) => m.member.characterId === character.id)?.seat;
      const turn = await runCharacterTurn(this.#deps, {
        projectId,
        conversationId: seat?.conversationId ?? null,
        character,
        capabilities,
        history,
        channel,
        signal,
        scene: { roomName: room.name, scenePrompt: room.scenePrompt, others: members.filter((m) => m.member.characterId !== character.id).map((m) => m.member.name), direction },
        onText: (delta) => publish({ type: 'chunk', characterId: character.id, content: delta, done: false, replyId }),
      });
      let text = turn.text.trim();
      // A voiced line is said once it has played: `done` ends the text, then the room waits for
      // the audio and stores what was heard (cut short if a human spoke over it).
      const playing = text ? outlet.awaitSpoken?.(character.id, replyId, text, signal) : null;
      let interrupted = false;
      if (playing) {
        publish({ type: 'chunk', characterId: character.id, content: '', done: true, replyId });
        const report = await playing;
        if (report?.interrupted) {
          interrupted = true;
          text = report.text.trim();
        }
      }
      if (text) {
        // Stored before `done` when there is no audio to wait for, so a client reacting to
        // `done` finds the line in the transcript.
        const entry = await this.#deps.rooms.appendTranscript(projectId, room.id, { speakerType: 'agent', characterId: character.id, speakerName: character.name, content: text }, outlet.epoch);
        publish({ type: 'transcript', entry });
        if (seat) await this.#deps.conversations.recordScene(seat.conversationId, heardSinceLastLine(history), text);
      }
      if (!playing) publish({ type: 'chunk', characterId: character.id, content: '', done: true, replyId });
      return { said: text !== '', interrupted };
    } catch (err) {
      publish({ ...toErrorEvent(err, `${character.name} could not answer.`), replyId });
      if (err instanceof TroupeError && err.detailCode === 'actor_superseded') throw err;
      if (!(err instanceof TroupeError) || err.status >= 500) this.#deps.logger.error({ err, roomId: room.id, characterId: character.id }, 'room line failed');
      return { said: false, interrupted: false };
    }
  }

  async #members(projectId: string, room: StoredRoom): Promise<{ member: SceneMember; seat: StoredParticipant; character: Character }[]> {
    const seats = room.participants.filter((p) => p.leftAt === null);
    const found = await Promise.all(
      seats.map(async (seat) => {
        const character = await this.#deps.characters.get(projectId, seat.characterId).catch(() => null);
        return character ? { member: { characterId: character.id, name: character.name, description: character.description }, seat, character } : null;
      }),
    );
    return found.filter((m) => m !== null);
  }
}

function toSceneLine(entry: TranscriptEntry): SceneLine {
  return { speakerType: entry.speakerType, characterId: entry.characterId, speakerName: speakerOf(entry), content: entry.content };
}

/** Character lines since the last player line. */
function trailingAgentLines(entries: readonly TranscriptEntry[]): number {
  let count = 0;
  for (let i = entries.length - 1; i >= 0 && entries[i]?.speakerType === 'agent'; i--) count++;
  return count;
}
