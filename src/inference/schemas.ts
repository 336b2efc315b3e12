import { z } from 'zod';
import { FUNCTION_NAME } from '../capabilities/schemas.ts';

/**
 * The chat-completions request as clients of OpenAI's API send it. Every field of the
 * interface is validated as specified; other documented OpenAI fields are accepted and passed
 * on, and anything else is a 400 naming it (as OpenAI does), so typos do not go unnoticed.
 */
const TextPart = z.object({ type: z.literal('text'), text: z.string() });
/** Images, audio and files are the upstream's to interpret; only their shape is checked. */
const OtherPart = z.looseObject({ type: z.enum(['image_url', 'input_audio', 'file', 'refusal']) });
const Content = z.union([z.string(), z.array(z.union([TextPart, OtherPart])).min(1)]);

const ToolCall = z.object({
  id: z.string().min(1),
  type: z.literal('function'),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const Message = z.discriminatedUnion('role', [
  z.strictObject({ role: z.literal('system'), content: Content, name: z.string().optional() }),
  z.strictObject({ role: z.literal('developer'), content: Content, name: z.string().optional() }),
  z.strictObject({ role: z.literal('user'), content: Content, name: z.string().optional() }),
  z
    .strictObject({
      role: z.literal('assistant'),
      content: Content.nullable().optional(),
      name: z.string().optional(),
      refusal: z.string().nullable().optional(),
      tool_calls: z.array(ToolCall).min(1).optional(),
      /** Replies' url citations; clients send the reply back as it came. Not for the upstream. */
      annotations: z.array(z.unknown()).optional(),
      /** Deprecated by OpenAI for tool_calls, still accepted by it. */
      function_call: z.object({ name: z.string().min(1), arguments: z.string() }).nullable().optional(),
      audio: z.object({ id: z.string() }).nullable().optional(),
    })
    .refine((m) => (m.content !== undefined && m.content !== null) || m.tool_calls !== undefined || (m.function_call ?? undefined) !== undefined, {
      message: 'an assistant message needs content or tool_calls',
    })
    .transform(({ annotations: _annotations, ...message }) => message),
  // `name` is not in OpenAI's schema for tool messages, but OpenAI accepts it and LangChain sends it.
  z.strictObject({ role: z.literal('tool'), content: Content, tool_call_id: z.string().min(1), name: z.string().optional() }),
  /** The deprecated `function` role, still accepted by OpenAI. */
  z.strictObject({ role: z.literal('function'), content: z.string().nullable(), name: z.string().min(1) }),
]);

const Tool = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: z.string().regex(FUNCTION_NAME, 'must match ^[a-zA-Z0-9_-]{1,64}$'),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const ToolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string().min(1) }) }),
]);

const ResponseFormat = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    json_schema: z.strictObject({
      name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must match ^[a-zA-Z0-9_-]{1,64}$'),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

export const ChatCompletionRequestSchema = z.strictObject({
  model: z.string().min(1).max(256),
  messages: z.array(Message).min(1, 'must hold at least one message'),
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  max_tokens: z.number().int().min(1).nullable().optional(),
  max_completion_tokens: z.number().int().min(1).nullable().optional(),
  stop: z.union([z.string(), z.array(z.string()).min(1).max(4)]).nullable().optional(),
  frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).nullable().optional(),
  seed: z.number().int().nullable().optional(),
  n: z.number().int().min(1).max(128).nullable().optional(),
  tools: z.array(Tool).max(128, 'at most 128 tools').optional(),
  tool_choice: ToolChoice.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: ResponseFormat.optional(),
  // Other OpenAI parameters: passed on unchanged.
  user: z.string().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullable().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  store: z.boolean().nullable().optional(),
  service_tier: z.string().nullable().optional(),
  reasoning_effort: z.string().nullable().optional(),
  verbosity: z.string().nullable().optional(),
  modalities: z.array(z.string()).nullable().optional(),
  safety_identifier: z.string().optional(),
  prompt_cache_key: z.string().optional(),
});

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;
export type ChatMessage = ChatCompletionRequest['messages'][number];
export type RequestTool = z.infer<typeof Tool>;
