import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { Logger } from 'pino';
import type { CharacterModel } from '../inference/character-model.ts';
import { firstAddressed, resolveMember } from './addressing.ts';
import { parseAnswer, relevanceMessages, sceneMessages, type ScriptedBeat } from './director-prompt.ts';

export interface SceneMember {
  characterId: string;
  name: string;
  description: string | null;
}

export interface SceneLine {
  speakerType: 'user' | 'agent';
  characterId: string | null;
  speakerName: string | null;
  content: string;
}

export interface DirectorInput {
  mode: 'freeform' | 'scripted';
  roomName: string;
  scenePrompt: string | null;
  /** Characters in the room now, in the order they joined. */
  members: SceneMember[];
  /** The recent transcript, oldest first; the last line is what just happened (empty at an opening). */
  transcript: SceneLine[];
  /** Character turns since the last user line (0 right after a user line). */
  agentTurnsSinceHuman: number;
  /** ROOM_MAX_AGENT_TURNS: character turns that may follow a character turn before the floor returns to the humans. */
  maxAgentTurns: number;
  /** The room just started and nothing was said yet: a scripted scene may open with a character. */
  opening: boolean;
  signal: AbortSignal;
}

export type Decision =
  | { speaker: SceneMember; direction: string | null; reason: 'addressed' | 'relevant' | 'fallback' | 'scene' }
  | { speaker: null; reason: 'floor_to_humans' | 'no_members' | 'turn_limit' | 'scene' };

interface DirectorDeps {
  model: CharacterModel;
  logger: Logger;
}

/** Enough for `{"speaker": ..., "direction": ...}` with some prose around it; a rambling model is cut off. */
const MAX_ANSWER_CHARS = 2_000;

const FLOOR_TO_HUMANS: Decision = { speaker: null, reason: 'floor_to_humans' };

/**
 * Who speaks next in a multi-character room, and (scripted) towards what. Pure domain: it sees
 * the members and the recent transcript, makes at most one small model call per decision, and
 * never throws for a bad or failing model (it falls back deterministically); only an abort of
 * `input.signal` propagates, since a cancelled decision must not start a turn.
 *
 * Always: at most one speaker, always a current member, never the speaker of the last line.
 */
export class Director {
  private readonly model: CharacterModel;
  private readonly logger: Logger;

  constructor(deps: DirectorDeps) {
    this.model = deps.model;
    this.logger = deps.logger;
  }

  async decide(input: DirectorInput): Promise<Decision> {
    if (input.members.length === 0) return { speaker: null, reason: 'no_members' };
    const last = input.transcript.at(-1);
    if (!last) {
      // Only a scripted scene opens with a character; freeform rooms wait for the humans. An
      // empty transcript without `opening` (nothing to answer) also leaves the floor to them.
      return input.opening && input.mode === 'scripted' ? this.scriptedOpening(input) : FLOOR_TO_HUMANS;
    }
    if (last.speakerType === 'agent' && turnLimitReached(input)) return { speaker: null, reason: 'turn_limit' };
    // The last line's speaker never answers itself (a user line has no character).
    const speakerId = last.speakerType === 'agent' ? last.characterId : null;
    const candidates = input.members.filter((m) => m.characterId !== speakerId);
    if (candidates.length === 0) return FLOOR_TO_HUMANS;
    const addressed = firstAddressed(last.content, input.members, speakerId);

    if (input.mode === 'freeform') {
      if (addressed) return speak(addressed, null, 'addressed');
      // Characters answer each other only when named; otherwise the humans have the floor.
      if (last.speakerType === 'agent') return FLOOR_TO_HUMANS;
      return this.mostRelevant(input, candidates);
    }

    if (last.speakerType === 'agent') {
      // The scene drives character-to-character beats; without a usable answer the humans get the floor.
      const speaker = input.members.find((m) => m.characterId === speakerId);
      const answer = await this.ask(input, sceneMessages(input, { kind: 'after_agent', speaker }), candidates, true);
      return answer ? sceneDecision(answer) : FLOOR_TO_HUMANS;
    }
    // After a player's line, a character named in it answers whatever the model says; the model
    // is still asked (told who answers) so the beat gets a direction.
    const beat: ScriptedBeat = { kind: 'after_user', addressed };
    const answer = await this.ask(input, sceneMessages(input, beat), candidates, true);
    if (addressed) return speak(addressed, answer?.speaker === addressed ? answer.direction : null, 'addressed');
    if (answer) return sceneDecision(answer);
    return this.fallback(input, candidates);
  }

  private async scriptedOpening(input: DirectorInput): Promise<Decision> {
    const answer = await this.ask(input, sceneMessages(input, { kind: 'opening' }), input.members, true);
    if (answer) return sceneDecision(answer);
    const first = input.members[0];
    return first ? speak(first, null, 'fallback') : { speaker: null, reason: 'no_members' };
  }

  /** Freeform, after a player's line that named no one: the model picks, or the fallback does. */
  private async mostRelevant(input: DirectorInput, candidates: SceneMember[]): Promise<Decision> {
    // The only possible speaker needs no model call.
    if (candidates.length === 1 && candidates[0]) return speak(candidates[0], null, 'relevant');
    const answer = await this.ask(input, relevanceMessages(input), candidates, false);
    if (answer?.speaker) return speak(answer.speaker, null, 'relevant');
    return this.fallback(input, candidates);
  }

  /** The member who has spoken least recently (never counts as least; ties by join order). */
  private fallback(input: DirectorInput, candidates: SceneMember[]): Decision {
    const lastSpoke = new Map<string, number>();
    input.transcript.forEach((line, index) => {
      if (line.speakerType === 'agent' && line.characterId) lastSpoke.set(line.characterId, index);
    });
    let chosen: SceneMember | undefined;
    let chosenAt = Infinity;
    for (const member of candidates) {
      const at = lastSpoke.get(member.characterId) ?? -1;
      if (at < chosenAt) [chosen, chosenAt] = [member, at];
    }
    return chosen ? speak(chosen, null, 'fallback') : FLOOR_TO_HUMANS;
  }

  /**
   * One structured model call. Returns the member named (among `candidates`) or null for "the
   * humans" when `allowNobody`; undefined, logged at warn, when there is no usable answer.
   */
  private async ask(
    input: DirectorInput,
    messages: ChatCompletionMessageParam[],
    candidates: SceneMember[],
    allowNobody: boolean,
  ): Promise<{ speaker: SceneMember | null; direction: string | null } | undefined> {
    const context = { room: input.roomName, mode: input.mode };
    let text = '';
    try {
      input.signal.throwIfAborted();
      for await (const chunk of this.model.streamReply(messages, [], input.signal)) {
        text += chunk.choices?.[0]?.delta?.content ?? '';
        if (text.length >= MAX_ANSWER_CHARS) break;
      }
    } catch (err) {
      if (input.signal.aborted) throw input.signal.reason;
      this.logger.warn({ ...context, err }, 'director model call failed');
      return undefined;
    }
    const answer = parseAnswer(text);
    const named = answer?.speaker;
    if (answer && named === null && allowNobody) return { speaker: null, direction: null };
    const speaker = named ? resolveMember(named, candidates, input.members) : undefined;
    if (answer && speaker) return { speaker, direction: answer.direction };
    this.logger.warn({ ...context, answer: text.slice(0, 200) }, 'director answer unusable');
    return undefined;
  }
}

/**
 * The first character line after a player's answers the player; each one after it answers a
 * character. Those may number `maxAgentTurns` (0: characters answer players only) before the
 * floor returns to the humans.
 */
function turnLimitReached(input: DirectorInput): boolean {
  return input.agentTurnsSinceHuman - 1 >= input.maxAgentTurns;
}

function speak(speaker: SceneMember, direction: string | null, reason: 'addressed' | 'relevant' | 'fallback' | 'scene'): Decision {
  return { speaker, direction, reason };
}

function sceneDecision(answer: { speaker: SceneMember | null; direction: string | null }): Decision {
  return answer.speaker ? speak(answer.speaker, answer.direction, 'scene') : { speaker: null, reason: 'scene' };
}
