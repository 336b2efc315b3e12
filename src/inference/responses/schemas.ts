import { z } from 'zod';
import { FUNCTION_NAME } from '../../capabilities/schemas.ts';

/**
 * The Responses API request (`POST /v1/responses`) as OpenAI's clients send it: openai-node,
 * the AI SDK's responses model and the Agents SDK. Function tools, messages and function-call
 * items are validated as specified; documented fields Troupe has no use for are accepted and
 * ignored; anything else is a 400 naming it, as OpenAI answers.
 */

/**
 * A string, or a list checked item by item. A plain z.union reports a bad list item as "Invalid
 * input" on the whole field; here its own path survives (`input[0].content[1].text`).
 */
function stringOrList<T extends z.ZodType>(list: T, description: string) {
  return z
    .unknown()
    .transform((value, ctx): string | z.output<T> => {
      if (typeof value === 'string') return value;
      const parsed = list.safeParse(value, { reportInput: true });
      if (parsed.success) return parsed.data;
      for (const issue of parsed.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
      return z.NEVER;
    })
    .meta({ description });
}

const optionalString = () => z.string().nullable().optional();
const ItemStatus = z.enum(['in_progress', 'completed', 'incomplete']);

const InputText = z.strictObject({
  type: z.literal('input_text'),
  text: z.string(),
  /** Sent by the AI SDK for prompt caching; meaningless to the upstream chat API. */
  prompt_cache_breakpoint: z.unknown().optional(),
});
const OutputText = z.strictObject({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
});
const Refusal = z.strictObject({ type: z.literal('refusal'), refusal: z.string() });
const InputImage = z.strictObject({
  type: z.literal('input_image'),
  image_url: optionalString(),
  file_id: optionalString(),
  detail: z.enum(['low', 'high', 'auto', 'original']).nullable().optional(),
  prompt_cache_breakpoint: z.unknown().optional(),
});
const InputFile = z.strictObject({
  type: z.literal('input_file'),
  file_id: optionalString(),
  file_data: z.string().optional(),
  file_url: z.string().optional(),
  filename: z.string().optional(),
  prompt_cache_breakpoint: z.unknown().optional(),
});
const ContentPart = z.discriminatedUnion('type', [InputText, OutputText, Refusal, InputImage, InputFile]);

const MessageItem = z.strictObject({
  type: z.literal('message'),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: stringOrList(z.array(ContentPart), 'A string, or a list of input_text, output_text, refusal, input_image and input_file parts'),
  id: optionalString(),
  status: ItemStatus.nullable().optional(),
  phase: z.enum(['commentary', 'final_answer']).nullable().optional(),
});

const FunctionCallItem = z.strictObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  id: optionalString(),
  status: ItemStatus.nullable().optional(),
  // Documented by OpenAI for its namespaced and programmatic tools; chat completions have neither.
  namespace: z.string().optional(),
  caller: z.unknown().optional(),
});

const FunctionCallOutputItem = z.strictObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: stringOrList(z.array(ContentPart), 'A string, or a list of input_text parts'),
  id: optionalString(),
  status: ItemStatus.nullable().optional(),
  name: z.string().optional(),
  namespace: z.string().optional(),
  caller: z.unknown().optional(),
});

const ItemReference = z.strictObject({ type: z.literal('item_reference'), id: z.string().min(1) });

/** Reasoning items of another provider's history: accepted, and not sent to the chat upstream. */
const ReasoningItem = z.looseObject({ type: z.literal('reasoning') });

/** Messages may leave out `type` (EasyInputMessage); it is filled in so items discriminate on it. */
const InputItem = z.preprocess(
  (value) =>
    typeof value === 'object' && value !== null && !Array.isArray(value) && !('type' in value) && 'role' in value ? { type: 'message', ...value } : value,
  z.discriminatedUnion('type', [MessageItem, FunctionCallItem, FunctionCallOutputItem, ItemReference, ReasoningItem]),
);

/** A string is one user message. */
const Input = z
  .preprocess((value) => (typeof value === 'string' ? [{ type: 'message', role: 'user', content: value }] : value), z.array(InputItem))
  .meta({ description: 'A string (one user message), or a list of messages, function_call, function_call_output and item_reference items' });

const FunctionTool = z.strictObject({
  type: z.literal('function', { error: 'only function tools are supported' }),
  name: z.string().regex(FUNCTION_NAME, 'must match ^[a-zA-Z0-9_-]{1,64}$'),
  description: optionalString(),
  parameters: z.record(z.string(), z.unknown()).nullable().optional(),
  strict: z.boolean().nullable().optional(),
});

const ToolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), name: z.string().min(1) }),
]);

const TextFormat = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must match ^[a-zA-Z0-9_-]{1,64}$'),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().optional(),
    strict: z.boolean().nullable().optional(),
  }),
]);

const Metadata = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys');

/** Reasoning settings: `effort` goes to the upstream as reasoning_effort, the rest is for OpenAI's own models. */
const ReasoningSummary = z.enum(['auto', 'concise', 'detailed']).nullable().optional();
const Reasoning = z.strictObject({
  effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']).nullable().optional(),
  summary: ReasoningSummary,
  generate_summary: ReasoningSummary,
  context: z.enum(['auto', 'current_turn', 'all_turns']).nullable().optional(),
  mode: z.string().nullable().optional(),
});

/** A field accepted only when left off, null or false. */
function offOnly<T extends z.ZodType>(schema: T, what: string) {
  return schema.refine((value) => value === null || value === undefined || value === false, { message: `${what} is not supported` }).optional();
}

export const ResponseCreateRequestSchema = z.strictObject({
  model: z.string().min(1).max(256),
  input: Input.optional(),
  instructions: optionalString(),
  tools: z.array(FunctionTool).max(128, 'at most 128 tools').optional(),
  tool_choice: ToolChoice.optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  text: z.strictObject({ format: TextFormat.optional(), verbosity: z.enum(['low', 'medium', 'high']).nullable().optional() }).optional(),
  // OpenAI's minimum; the interface is OpenAI's, so is the rule.
  max_output_tokens: z.number().int().min(16).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_obfuscation: z.boolean().optional() }).nullable().optional(),
  store: z.boolean().nullable().optional(),
  previous_response_id: optionalString(),
  metadata: Metadata.nullable().optional(),
  user: z.string().optional(),
  reasoning: Reasoning.nullable().optional(),
  service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority', 'fast', 'ultrafast']).nullable().optional(),
  safety_identifier: z.string().max(64).nullable().optional(),
  prompt_cache_key: optionalString(),
  // Accepted and ignored: they tune OpenAI's own service (caching, built-in tools, logprob
  // output, context handling) and have no chat-completions counterpart Troupe could honour.
  include: z.array(z.string()).nullable().optional(),
  truncation: z.enum(['auto', 'disabled']).nullable().optional(),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  max_tool_calls: z.number().int().min(1).nullable().optional(),
  prompt_cache_retention: z.enum(['in_memory', '24h']).nullable().optional(),
  prompt_cache_options: z.record(z.string(), z.unknown()).nullable().optional(),
  context_management: z.array(z.record(z.string(), z.unknown())).nullable().optional(),
  moderation: z.record(z.string(), z.unknown()).nullable().optional(),
  // Accepted only when off: Troupe answers in the foreground, without OpenAI's stored conversations or prompts.
  background: offOnly(z.boolean().nullable().optional(), 'background mode'),
  conversation: offOnly(z.unknown(), 'a conversation object (use previous_response_id)'),
  prompt: offOnly(z.unknown(), 'a stored prompt template'),
});

export type ResponseCreateRequest = z.infer<typeof ResponseCreateRequestSchema>;
export type InputItem = z.output<typeof InputItem>;
export type MessageItem = z.output<typeof MessageItem>;
export type ContentPart = z.output<typeof ContentPart>;
export type TextFormat = z.output<typeof TextFormat>;
export type ResponseFunctionToolParam = z.output<typeof FunctionTool>;
export type ResponseToolChoice = z.output<typeof ToolChoice>;
