import { createOpenAI } from '@ai-sdk/openai';
import { tool as langchainTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { OpenAI as LlamaOpenAI } from '@llamaindex/openai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { generateText, stepCountIs, streamText, tool as aiTool } from 'ai';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BACKENDS } from '../support/env.ts';
import { startV1Fixture, type V1Fixture } from '../support/v1.ts';

type Sent = { messages: { role: string; content: unknown; name?: string }[]; tools?: { function: { name: string } }[]; stream?: boolean };

/**
 * Every OpenAI-format client, installed as users install it and called the way its docs show,
 * pointed at Troupe with only a base URL and a key: against a character and an upstream model.
 */
describe.each(BACKENDS)('OpenAI-format clients against Troupe on $kind', (backend) => {
  let f: V1Fixture;
  let baseURL: string;
  let character: { id: string };

  beforeAll(async () => {
    f = await startV1Fixture(backend);
    baseURL = `${f.t.url}/v1`;
    character = await f.api.post('/characters', { name: 'Mira', description: 'A cartographer who loves old maps.' }).expect(201);
    // The Agents SDK would export traces to OpenAI's own servers; users of other providers turn it off.
    setTracingDisabled(true);
  });
  afterAll(() => f.close());
  afterEach(() => f.upstream.clearScripts());

  const chats = () => f.upstream.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.body as Sent);
  const lastChat = () => chats().at(-1) as Sent;
  const weatherCall = { name: 'get_weather', arguments: { city: 'Paris' } };

  const targets = [
    { name: 'a character', model: () => character.id, persona: true },
    { name: 'an upstream model', model: () => 'fake-chat-1', persona: false },
  ];

  describe.each(targets)('with $name as model', (target) => {
    /** The upstream saw the character's persona exactly when a character was the model. */
    const checkPersona = () => {
      const system = lastChat().messages.filter((m) => m.role === 'system').map((m) => String(m.content));
      if (target.persona) expect(system[0]).toContain('Mira');
      else expect(system.join('\n')).not.toContain('Mira');
    };

    it('openai-node: chat with stream left out gets a ChatCompletion, streaming gets chunks, tools round-trip', async () => {
      const client = new OpenAI({ baseURL, apiKey: f.key });
      f.upstream.script({ text: 'Maps of the north.' });
      const completion = await client.chat.completions.create({ model: target.model(), messages: [{ role: 'user', content: 'What do you draw?' }] });
      expect(completion.object).toBe('chat.completion');
      expect(completion.choices[0]?.message.content).toBe('Maps of the north.');
      checkPersona();

      f.upstream.script({ text: 'Rivers and roads.' });
      const stream = await client.chat.completions.create({ model: target.model(), messages: [{ role: 'user', content: 'More?' }], stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).toBe('Rivers and roads.');

      f.upstream.script({ toolCalls: [weatherCall] });
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
      const asked = await client.chat.completions.create({ model: target.model(), messages: [{ role: 'user', content: 'Weather in Paris?' }], tools });
      const call = asked.choices[0]?.message.tool_calls?.[0];
      expect(call?.type === 'function' && call.function.name).toBe('get_weather');
      f.upstream.script({ text: 'Sunny in Paris.' });
      const answered = await client.chat.completions.create({
        model: target.model(),
        tools,
        messages: [{ role: 'user', content: 'Weather in Paris?' }, asked.choices[0]!.message, { role: 'tool', tool_call_id: call!.id, content: 'sunny' }],
      });
      expect(answered.choices[0]?.message.content).toBe('Sunny in Paris.');
    });

    it('openai-node: responses, plain and streamed, and a tool round', async () => {
      const client = new OpenAI({ baseURL, apiKey: f.key });
      f.upstream.script({ text: 'An atlas.' });
      const response = await client.responses.create({ model: target.model(), input: 'Favourite book?' });
      expect(response.output_text).toBe('An atlas.');
      checkPersona();

      f.upstream.script({ text: 'A globe.' });
      const stream = await client.responses.create({ model: target.model(), input: 'Favourite thing?', stream: true });
      let text = '';
      for await (const event of stream) if (event.type === 'response.output_text.delta') text += event.delta;
      expect(text).toBe('A globe.');

      f.upstream.script({ toolCalls: [weatherCall] });
      const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
      const asked = await client.responses.create({ model: target.model(), input: 'Weather in Paris?', tools });
      const call = asked.output.find((item) => item.type === 'function_call');
      expect(call?.type === 'function_call' && call.name).toBe('get_weather');
      f.upstream.script({ text: 'Sunny in Paris.' });
      const answered = await client.responses.create({
        model: target.model(),
        tools,
        previous_response_id: asked.id,
        input: [{ type: 'function_call_output', call_id: call?.type === 'function_call' ? call.call_id : '', output: 'sunny' }],
      });
      expect(answered.output_text).toBe('Sunny in Paris.');
      checkPersona();
    });

    it.each(['responses', 'chat'] as const)('AI SDK: generateText, streamText and a tool with execute through openai%s', async (api) => {
      const openai = createOpenAI({ baseURL, apiKey: f.key });
      const model = api === 'responses' ? openai(target.model()) : openai.chat(target.model());
      f.upstream.script({ text: 'Coastlines.' });
      const generated = await generateText({ model, prompt: 'What do you map?' });
      expect(generated.text).toBe('Coastlines.');
      checkPersona();

      f.upstream.script({ text: 'Islands too.' });
      const streamed = streamText({ model, prompt: 'And?' });
      let text = '';
      for await (const delta of streamed.textStream) text += delta;
      expect(text).toBe('Islands too.');

      f.upstream.script({ toolCalls: [weatherCall] }, { text: 'Sunny in Paris.' });
      const withTool = await generateText({
        model,
        prompt: 'Weather in Paris?',
        tools: { get_weather: aiTool({ description: 'Weather by city', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `sunny in ${city}` }) },
        stopWhen: stepCountIs(2),
      });
      expect(withTool.text).toBe('Sunny in Paris.');
      expect(JSON.stringify(lastChat().messages)).toContain('sunny in Paris');
    });

    it('LangChain ChatOpenAI: invoke, stream and a bindTools round', async () => {
      const llm = new ChatOpenAI({ model: target.model(), apiKey: f.key, configuration: { baseURL } });
      f.upstream.script({ text: 'Old charts.' });
      expect((await llm.invoke('What do you keep?')).content).toBe('Old charts.');
      checkPersona();

      f.upstream.script({ text: 'Sea charts.' });
      let text = '';
      for await (const chunk of await llm.stream('Which?')) text += String(chunk.content);
      expect(text).toBe('Sea charts.');

      const weather = langchainTool(async ({ city }: { city: string }) => `sunny in ${city}`, {
        name: 'get_weather',
        description: 'Weather by city',
        schema: z.object({ city: z.string() }),
      });
      const withTools = llm.bindTools([weather]);
      f.upstream.script({ toolCalls: [weatherCall] });
      const asked = await withTools.invoke('Weather in Paris?');
      expect(asked.tool_calls?.[0]?.name).toBe('get_weather');
      const result = await weather.invoke(asked.tool_calls![0]!);
      f.upstream.script({ text: 'Sunny in Paris.' });
      // LangChain names the tool on the message it sends back; OpenAI accepts that field.
      const answered = await withTools.invoke([{ role: 'user', content: 'Weather in Paris?' }, asked, result]);
      expect(answered.content).toBe('Sunny in Paris.');
      expect(lastChat().messages.find((m) => m.role === 'tool')).toMatchObject({ content: 'sunny in Paris', name: 'get_weather' });
    });

    it('LlamaIndex OpenAI: chat and stream', async () => {
      const llm = new LlamaOpenAI({ model: target.model(), apiKey: f.key, baseURL });
      f.upstream.script({ text: 'Ink and vellum.' });
      const reply = await llm.chat({ messages: [{ role: 'user', content: 'Your tools?' }] });
      expect(reply.message.content).toBe('Ink and vellum.');
      checkPersona();

      f.upstream.script({ text: 'And a compass.' });
      let text = '';
      for await (const chunk of await llm.chat({ messages: [{ role: 'user', content: 'More?' }], stream: true })) text += chunk.delta;
      expect(text).toBe('And a compass.');
    });

    it('OpenAI Agents SDK: an Agent with a function tool, run by a Runner', async () => {
      // One process here serves several Troupes in turn, so the client goes to this run's
      // provider rather than the process-wide default (which the SDK caches at first use).
      const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: new OpenAI({ baseURL, apiKey: f.key }) }) });
      const agent = new Agent({
        name: 'Guide',
        instructions: 'Answer travellers briefly.',
        model: target.model(),
        tools: [agentTool({ name: 'get_weather', description: 'Weather by city', parameters: z.object({ city: z.string() }), execute: async ({ city }) => `sunny in ${city}` })],
      });
      f.upstream.script({ toolCalls: [weatherCall] }, { text: 'Sunny in Paris.' });
      const result = await runner.run(agent, 'Weather in Paris?');
      expect(result.finalOutput).toBe('Sunny in Paris.');
      expect(JSON.stringify(lastChat().messages)).toContain('sunny in Paris');
      checkPersona();
    });
  });

  it('streams by default for callers that are not an SDK, and for SDK callers that ask for events', async () => {
    const post = (headers: Record<string, string>) =>
      fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.key}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: character.id, messages: [{ role: 'user', content: 'Hi' }] }),
      });
    const plain = await post({});
    expect(plain.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await plain.text()).toContain('data: [DONE]');
    const sdkAskingForEvents = await post({ 'x-stainless-lang': 'js', accept: 'text/event-stream' });
    expect(sdkAskingForEvents.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await sdkAskingForEvents.text();
    const sdk = await post({ 'x-stainless-lang': 'js', accept: 'application/json' });
    expect(sdk.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await sdk.json()) as { object: string }).object).toBe('chat.completion');
    const aiSdk = await post({ 'user-agent': 'ai-sdk-openai/4.0.118 ai/7.0.173 node.js/v24.9.0' });
    expect(aiSdk.headers.get('content-type')).toMatch(/^application\/json/);
    await aiSdk.text();
  });
});
