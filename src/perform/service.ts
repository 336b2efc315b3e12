import type { CapabilityCallEvent } from '../capabilities/executor.ts';
import type { CapabilityService } from '../capabilities/service.ts';
import type { Character } from '../characters/schemas.ts';
import type { CharacterService } from '../characters/service.ts';
import { TroupeError } from '../errors.ts';
import { runCharacterTurn, type TurnDeps } from '../inference/character-turn.ts';

export type NpcAction = { type: 'text'; content: string } | { type: 'function'; name: string; input: Record<string, unknown> };

export interface PerformTurn {
  role: 'player' | 'npc';
  content: string;
}

/**
 * Perform: an NPC (a character) decides its next actions from a history the game keeps. Client
 * capabilities come back as function actions; server capabilities run through their webhooks.
 * With the character and its capabilities cached, nothing here touches the database.
 */
export interface PerformDeps extends TurnDeps {
  characters: CharacterService;
  capabilities: CapabilityService;
}

export class PerformService {
  readonly #deps: PerformDeps;

  constructor(deps: PerformDeps) {
    this.#deps = deps;
  }

  /** `signal`: the caller left; the upstream call is cancelled with it. */
  async perform(projectId: string, npcId: string, history: readonly PerformTurn[], signal: AbortSignal): Promise<NpcAction[]> {
    const character = await this.#npc(projectId, npcId);
    const capabilities = await this.#deps.capabilities.getMany(projectId, character.capabilityGroupIds);
    const delivered: CapabilityCallEvent[] = [];
    const turn = await runCharacterTurn(
      this.#deps,
      {
        projectId,
        conversationId: null,
        character,
        capabilities,
        history: history.map((h) => (h.role === 'player' ? { role: 'user', content: h.content } : { role: 'assistant', content: h.content })),
        channel: { deliver: (call) => delivered.push(call) },
        signal,
      },
    );
    const clientCalls = new Set(delivered.map((c) => c.callId));
    return turn.events.flatMap((event): NpcAction[] => {
      if (event.kind === 'text') return event.text.trim() ? [{ type: 'text', content: event.text.trim() }] : [];
      return clientCalls.has(event.call.callId) ? [{ type: 'function', name: event.call.name, input: event.call.params }] : [];
    });
  }

  async #npc(projectId: string, npcId: string): Promise<Character> {
    try {
      return await this.#deps.characters.get(projectId, npcId);
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'not_found') {
        throw new TroupeError('not_found', `No NPC (character) with id '${npcId}' exists in this project.`, { param: 'npcId', detailCode: 'npc_not_found' });
      }
      throw err;
    }
  }
}
