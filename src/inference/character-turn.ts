import type { ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { CallContext, CapabilityExecutor } from '../capabilities/executor.ts';
import type { Capability } from '../capabilities/schemas.ts';
import type { Character } from '../characters/schemas.ts';
import type { RecordedCapabilityCall } from '../db/schema.ts';
import { buildCharacterSystemPrompt, capabilityTools, type SceneContext } from '../prompt/character-prompt.ts';
import type { Citation, Knowledge } from '../retrieval/knowledge.ts';
import { withoutNul } from '../input/text.ts';
import type { CharacterModel } from './character-model.ts';

/** What happened in a turn, in order: what the character said and which calls it made. */
export type TurnEvent = { kind: 'text'; text: string } | { kind: 'call'; call: RecordedCapabilityCall };

export interface TurnInput extends Omit<CallContext, 'characterId' | 'capabilities'> {
  character: Character;
  capabilities: readonly Capability[];
  /** The conversation so far, oldest first, ending with the player's message. */
  history: ChatCompletionMessageParam[];
  /** Streamed text as it arrives. */
  onText?: (delta: string) => void;
  /** In a room: the scene the character speaks in. */
  scene?: SceneContext;
}

export interface TurnResult {
  text: string;
  calls: RecordedCapabilityCall[];
  events: TurnEvent[];
  /** A client_function_call was handed to the caller (HTTP, perform), so generation stopped. */
  stoppedForCaller: boolean;
  /** The document chunks the reply was given. */
  citations: Citation[];
}

export interface TurnDeps {
  model: CharacterModel;
  executor: Pick<CapabilityExecutor, 'execute'>;
  knowledge: Pick<Knowledge, 'retrieve'>;
  maxRounds: number;
}

/**
 * One reply of a character, with its capability calls: stream the model, execute what it calls
 * (through the one CapabilityExecutor), feed results back, up to `maxRounds` model calls.
 * Conversations (HTTP and WebSocket) and perform all answer through here.
 */
export async function runCharacterTurn(deps: TurnDeps, input: TurnInput): Promise<TurnResult> {
  const tools = capabilityTools(input.capabilities);
  const { snippets, citations } = await deps.knowledge.retrieve(input.projectId, input.character.id, lastPlayerText(input.history), input.signal);
  const messages: ChatCompletionMessageParam[] = [
    { role: 'system', content: buildCharacterSystemPrompt({ character: input.character, capabilities: input.capabilities, knowledge: snippets, ...(input.scene ? { scene: input.scene } : {}) }) },
    ...input.history,
  ];
  const result: TurnResult = { text: '', calls: [], events: [], stoppedForCaller: false, citations };
  const say = (raw: string) => {
    const delta = withoutNul(raw);
    if (!delta) return;
    result.text += delta;
    const last = result.events.at(-1);
    if (last?.kind === 'text') last.text += delta;
    else result.events.push({ kind: 'text', text: delta });
    input.onText?.(delta);
  };

  for (let round = 1; round <= deps.maxRounds; round++) {
    // Rounds after the first continue the same reply: keep words apart.
    if (round > 1 && result.text && !/\s$/.test(result.text)) say(' ');
    const { content, toolCalls } = await streamRound(deps.model, messages, tools, input.signal, say);
    if (toolCalls.length === 0) break;
    messages.push({ role: 'assistant', content: content || null, tool_calls: toolCalls });
    const ctx: CallContext = { ...input, characterId: input.character.id };
    for (const call of toolCalls) {
      const outcome = await deps.executor.execute({ id: call.id, name: call.function.name, arguments: call.function.arguments }, ctx);
      if (outcome.recorded) {
        result.calls.push(outcome.recorded);
        result.events.push({ kind: 'call', call: outcome.recorded });
      }
      if (outcome.kind === 'stop') result.stoppedForCaller = true;
      else messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(outcome.toolResult ?? null) });
    }
    if (result.stoppedForCaller) break;
  }
  if (result.text.endsWith(' ')) result.text = result.text.trimEnd();
  return result;
}

/** What retrieval looks for: the player's latest words. */
export function lastPlayerText(history: readonly ChatCompletionMessageParam[]): string {
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i];
    if (message?.role !== 'user') continue;
    const { content } = message;
    if (typeof content === 'string') return content;
    return content.map((part) => (part.type === 'text' ? part.text : '')).join(' ');
  }
  return '';
}

async function streamRound(
  model: CharacterModel,
  messages: ChatCompletionMessageParam[],
  tools: ReturnType<typeof capabilityTools>,
  signal: AbortSignal,
  say: (delta: string) => void,
): Promise<{ content: string; toolCalls: ChatCompletionMessageFunctionToolCall[] }> {
  let content = '';
  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  for await (const chunk of model.streamReply(messages, tools, signal)) {
    const delta = chunk.choices?.[0]?.delta;
    if (delta?.content) {
      content += delta.content;
      say(delta.content);
    }
    for (const part of delta?.tool_calls ?? []) {
      const entry = calls.get(part.index) ?? { id: '', name: '', arguments: '' };
      if (part.id) entry.id = part.id;
      if (part.function?.name) entry.name += part.function.name;
      if (part.function?.arguments) entry.arguments += part.function.arguments;
      calls.set(part.index, entry);
    }
  }
  const toolCalls = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([index, c]) => ({ id: c.id || `call_${index}`, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }));
  return { content, toolCalls };
}
