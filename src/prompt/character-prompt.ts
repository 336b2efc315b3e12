import type { Capability } from '../capabilities/schemas.ts';
import type { Character } from '../characters/schemas.ts';

/** A function tool in the chat-completions wire format. */
export interface FunctionTool {
  type: 'function';
  function: {
    name: string;
    description?: string;
    parameters: {
      type: 'object';
      properties: Record<string, { type: string; description?: string }>;
      required: string[];
      additionalProperties: false;
    };
  };
}

/** Retrieved knowledge to ground a reply; filled by document retrieval. */
export interface KnowledgeSnippet {
  source: string;
  text: string;
}

/** A multi-character scene (a room) the character speaks in. */
export interface SceneContext {
  roomName: string;
  scenePrompt: string | null;
  /** The other characters present, by name. */
  others: readonly string[];
  /** The director's aim for this line (scripted rooms), if any. */
  direction: string | null;
}

export interface CharacterPromptInput {
  character: Pick<Character, 'name' | 'description'>;
  capabilities: readonly Capability[];
  knowledge?: readonly KnowledgeSnippet[];
  scene?: SceneContext;
}

/**
 * The system prompt of a character. Every surface (HTTP conversations, WebSocket, /v1, perform,
 * voice) builds it here so a character behaves the same wherever it is reached.
 */
export function buildCharacterSystemPrompt(input: CharacterPromptInput): string {
  const { character, capabilities, knowledge = [], scene } = input;
  const parts = [
    `You are ${character.name}, a character in a game. Stay in character: speak as ${character.name} would, ` +
      'in the first person, and never mention being an AI or a language model.',
  ];
  if (character.description) parts.push(`Who you are:\n${character.description.trim()}`);
  if (scene) {
    const present = scene.others.length > 0 ? `Also here: ${scene.others.join(', ')}.` : 'No other character is here.';
    const lines = [
      `You are in a scene, "${scene.roomName}", with players and other characters. ${present}`,
      "Lines from others reach you as 'Name: words'. Answer with your own words only: no name prefix, and never speak for anyone else.",
    ];
    if (scene.scenePrompt) lines.push(`The scene:\n${scene.scenePrompt.trim()}`);
    if (scene.direction) lines.push(`Your aim in this line: ${scene.direction.trim()}`);
    parts.push(lines.join('\n'));
  }
  if (capabilities.length > 0) {
    const lines = capabilities.map((c) => `- ${c.name}${c.description ? `: ${c.description}` : ''}`);
    parts.push(`You can act in the game by calling these functions when the moment calls for it:\n${lines.join('\n')}`);
  }
  if (knowledge.length > 0) {
    const lines = knowledge.map((k) => `[${k.source}] ${k.text.trim()}`);
    parts.push(`What you know (use it when relevant; do not invent beyond it):\n${lines.join('\n')}`);
  }
  return parts.join('\n\n');
}

/** Capabilities as function tools; parameter definitions become a JSON schema. */
export function capabilityTools(capabilities: readonly Capability[]): FunctionTool[] {
  return capabilities.map((c) => ({
    type: 'function',
    function: {
      name: c.name,
      ...(c.description ? { description: c.description } : {}),
      parameters: {
        type: 'object',
        properties: Object.fromEntries(
          c.parameters.map((p) => [p.name, { type: p.type, ...(p.description ? { description: p.description } : {}) }]),
        ),
        required: c.parameters.filter((p) => p.required).map((p) => p.name),
        additionalProperties: false,
      },
    },
  }));
}

/** The caller's tools win over a capability with the same name. */
export function mergeTools<T extends { function: { name: string } }>(capabilityTools: readonly FunctionTool[], callerTools: readonly T[]): (FunctionTool | T)[] {
  const callerNames = new Set(callerTools.map((t) => t.function.name));
  return [...capabilityTools.filter((t) => !callerNames.has(t.function.name)), ...callerTools];
}
