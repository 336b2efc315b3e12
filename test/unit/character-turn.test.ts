import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CapabilityExecutor, type CapabilityCallEvent, type ClientChannel } from '../../src/capabilities/executor.ts';
import type { Capability } from '../../src/capabilities/schemas.ts';
import type { Character } from '../../src/characters/schemas.ts';
import type { CharacterModel } from '../../src/inference/character-model.ts';
import { runCharacterTurn, type TurnDeps } from '../../src/inference/character-turn.ts';
import type { ProjectService } from '../../src/projects/service.ts';
import type { Retrieved } from '../../src/retrieval/knowledge.ts';

/** One model call's stream: text pieces, then tool calls (each possibly split into parts). */
type Round = { text?: string[]; calls?: { index: number; id?: string; name?: string; arguments?: string }[] };

/** An in-memory model that answers each call with the next scripted round and records what it was sent. */
function scriptedModel(rounds: Round[]): CharacterModel & { calls: { messages: ChatCompletionMessageParam[]; tools: ChatCompletionTool[] }[] } {
  const calls: { messages: ChatCompletionMessageParam[]; tools: ChatCompletionTool[] }[] = [];
  return {
    calls,
    async *streamReply(messages, tools) {
      calls.push({ messages: structuredClone(messages), tools });
      const round = rounds.shift() ?? { text: ['(no more script)'] };
      for (const text of round.text ?? []) yield chunk({ content: text });
      for (const call of round.calls ?? []) {
        yield chunk({ tool_calls: [{ index: call.index, ...(call.id ? { id: call.id } : {}), function: { name: call.name, arguments: call.arguments } }] });
      }
    },
  };
}

function chunk(delta: Record<string, unknown>): ChatCompletionChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] } as ChatCompletionChunk;
}

const character: Character = {
  id: 'character_1',
  createdAt: new Date(0).toISOString(),
  projectId: 'proj_1',
  name: 'Quartermaster',
  description: 'Keeps the stores.',
  voiceId: null,
  voiceDescription: null,
  hasAvatar: false,
  capabilityGroupIds: [],
};

const capability = (name: string, type: Capability['type'], parameters: Capability['parameters'] = []): Capability => ({
  id: `capability_${name}`,
  createdAt: new Date(0).toISOString(),
  projectId: 'proj_1',
  name,
  description: null,
  type,
  parameters,
  webhookUrl: null,
});

const give = capability('give_item', 'client_function_fire', [{ name: 'item', type: 'string', description: null, required: true }]);
const ask = capability('ask_price', 'client_function_call', []);

function deps(model: CharacterModel, retrieved: Retrieved = { snippets: [], citations: [] }, maxRounds = 4): TurnDeps & { queries: string[] } {
  const queries: string[] = [];
  return {
    model,
    executor: new CapabilityExecutor({
      config: { webhookTimeoutMs: 1_000, webhookAllowPrivate: false, resultTimeoutMs: 50, maxRounds },
      projects: {} as ProjectService, // only server capabilities need it; none here
      logger: pino({ level: 'silent' }),
    }),
    knowledge: {
      retrieve: (_projectId: string, _characterId: string, query: string) => {
        queries.push(query);
        return Promise.resolve(retrieved);
      },
    },
    maxRounds,
    queries,
  };
}

function input(history: ChatCompletionMessageParam[], channel: ClientChannel, capabilities: Capability[] = [], onText?: (delta: string) => void) {
  return { projectId: 'proj_1', conversationId: 'conv_1', character, capabilities, history, channel, signal: new AbortController().signal, ...(onText ? { onText } : {}) };
}

const silent: ClientChannel = { deliver: () => {} };

describe('the turn loop (runCharacterTurn)', () => {
  it('streams the reply as it arrives, after the system prompt and the history', async () => {
    const model = scriptedModel([{ text: ['Aye, ', 'rope is ', 'in the hold.'] }]);
    const deltas: string[] = [];
    const turn = await runCharacterTurn(deps(model), input([{ role: 'user', content: 'Got rope?' }], silent, [], (d) => deltas.push(d)));
    expect(deltas).toEqual(['Aye, ', 'rope is ', 'in the hold.']);
    expect(turn).toMatchObject({ text: 'Aye, rope is in the hold.', calls: [], stoppedForCaller: false, events: [{ kind: 'text', text: 'Aye, rope is in the hold.' }] });
    expect(model.calls).toHaveLength(1);
    const [system, ...rest] = model.calls[0]?.messages ?? [];
    expect(system?.role).toBe('system');
    expect(String(system?.content)).toContain('Quartermaster');
    expect(rest).toEqual([{ role: 'user', content: 'Got rope?' }]);
    expect(model.calls[0]?.tools).toEqual([]);
  });

  it('delivers a fired capability, feeds its result back, and keeps the words of both rounds apart', async () => {
    const model = scriptedModel([
      { text: ['Here.'], calls: [{ index: 0, id: 'call_a', name: 'give_item', arguments: '{"item":' }, { index: 0, arguments: '"rope"}' }] },
      { text: ['Mind the knots.'] },
    ]);
    const delivered: CapabilityCallEvent[] = [];
    const turn = await runCharacterTurn(deps(model), input([{ role: 'user', content: 'Rope, please' }], { deliver: (c) => delivered.push(c) }, [give]));
    expect(delivered).toEqual([{ callId: 'call_a', name: 'give_item', type: 'client_function_fire', params: { item: 'rope' } }]);
    expect(turn.text).toBe('Here. Mind the knots.');
    expect(turn.events.map((e) => e.kind)).toEqual(['text', 'call', 'text']);
    const second = model.calls[1]?.messages ?? [];
    expect(second.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'call_a', function: { name: 'give_item', arguments: '{"item":"rope"}' } }] });
    expect(second.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_a', content: JSON.stringify({ status: 'delivered to the game client' }) });
    expect(model.calls[0]?.tools.map((t) => (t as { function: { name: string } }).function.name)).toEqual(['give_item']);
  });

  it('stops for the caller at a client_function_call when no live client can answer it', async () => {
    const model = scriptedModel([{ text: ['Let me check.'], calls: [{ index: 0, id: 'call_p', name: 'ask_price', arguments: '{}' }] }, { text: ['never said'] }]);
    const turn = await runCharacterTurn(deps(model), input([{ role: 'user', content: 'How much?' }], silent, [ask]));
    expect(turn.stoppedForCaller).toBe(true);
    expect(turn.text).toBe('Let me check.');
    expect(model.calls).toHaveLength(1);
  });

  it("waits for a live client's result and tells the model when none comes in time", async () => {
    const model = scriptedModel([{ calls: [{ index: 0, id: 'call_p', name: 'ask_price', arguments: '{}' }] }, { text: ['Fine.'] }]);
    const channel: ClientChannel = { deliver: () => {}, awaitResult: () => Promise.resolve({ received: false }) };
    const turn = await runCharacterTurn(deps(model), input([{ role: 'user', content: 'How much?' }], channel, [ask]));
    expect(turn.text).toBe('Fine.');
    expect(turn.calls[0]?.result).toMatchObject({ error: expect.stringContaining('did not answer') as unknown });
  });

  it('refuses bad arguments to the model without delivering anything', async () => {
    const model = scriptedModel([{ calls: [{ index: 0, id: 'call_x', name: 'give_item', arguments: '{"item":7}' }] }, { text: ['Sorry.'] }]);
    const delivered: CapabilityCallEvent[] = [];
    const turn = await runCharacterTurn(deps(model), input([{ role: 'user', content: 'x' }], { deliver: (c) => delivered.push(c) }, [give]));
    expect(delivered).toEqual([]);
    expect(turn.calls).toEqual([]);
    expect(String(model.calls[1]?.messages.at(-1)?.content)).toContain('The call was not made');
  });

  it('makes at most maxRounds model calls', async () => {
    const again = (): Round => ({ calls: [{ index: 0, id: `call_${Math.random()}`, name: 'give_item', arguments: '{"item":"rope"}' }] });
    const model = scriptedModel([again(), again(), again(), again()]);
    await runCharacterTurn(deps(model, undefined, 2), input([{ role: 'user', content: 'all of it' }], silent, [give]));
    expect(model.calls).toHaveLength(2);
  });

  it('drops NUL characters from what the model says', async () => {
    const model = scriptedModel([{ text: ['a\u0000b', '\u0000'] }]);
    const deltas: string[] = [];
    const turn = await runCharacterTurn(deps(model), input([{ role: 'user', content: 'x' }], silent, [], (d) => deltas.push(d)));
    expect(turn.text).toBe('ab');
    expect(deltas).toEqual(['ab']);
  });

  it("retrieves with the player's latest words and puts what it found in the system prompt", async () => {
    const model = scriptedModel([{ text: ['The tide turns at dusk.'] }]);
    const retrieved: Retrieved = {
      snippets: [{ source: 'tides.md', text: 'High tide is at dusk.' }],
      citations: [{ documentId: 'doc_1', chunkId: 'chunk_1', score: 1, excerpt: 'High tide is at dusk.' }],
    };
    const d = deps(model, retrieved);
    const history: ChatCompletionMessageParam[] = [
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'Ahoy.' },
      { role: 'user', content: [{ type: 'text', text: 'When is' }, { type: 'text', text: 'high tide?' }] },
    ];
    const turn = await runCharacterTurn(d, input(history, silent));
    expect(d.queries).toEqual(['When is high tide?']);
    expect(String(model.calls[0]?.messages[0]?.content)).toContain('High tide is at dusk.');
    expect(turn.citations).toEqual(retrieved.citations);
  });
});
