import { randomBytes } from 'node:crypto';
import type { Citation } from '../../retrieval/knowledge.ts';
import type { ResponseCreateRequest, TextFormat } from './schemas.ts';

/** The objects of OpenAI's Responses API that Troupe sends, and how a response object is put together. */

export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

export interface OutputTextPart {
  type: 'output_text';
  text: string;
  annotations: unknown[];
  logprobs: unknown[];
}

export interface RefusalPart {
  type: 'refusal';
  refusal: string;
}

export interface OutputMessage {
  type: 'message';
  id: string;
  role: 'assistant';
  status: ItemStatus;
  content: (OutputTextPart | RefusalPart)[];
}

export interface FunctionCallOutput {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

export type OutputItem = OutputMessage | FunctionCallOutput;

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

/** `server_error` and `rate_limit_exceeded` are the codes of OpenAI's ResponseError that fit an upstream failure. */
export interface ResponseError {
  code: 'server_error' | 'rate_limit_exceeded';
  message: string;
}

export interface IncompleteDetails {
  reason: 'max_output_tokens' | 'content_filter';
}

/** The response object; `citations` is Troupe's addition when a character's documents were used. */
export interface ResponseObject {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  completed_at: number | null;
  error: ResponseError | null;
  incomplete_details: IncompleteDetails | null;
  output: OutputItem[];
  usage?: ResponseUsage;
  citations?: Citation[];
  [setting: string]: unknown;
}

/** What the caller asked for, echoed in every response object as OpenAI does. */
export type ResponseSettings = Record<string, unknown> & { model: string; store: boolean };

export function newResponseId(): string {
  return `resp_${randomBytes(24).toString('hex')}`;
}

export function newMessageId(): string {
  return `msg_${randomBytes(24).toString('hex')}`;
}

export function newFunctionCallId(): string {
  return `fc_${randomBytes(24).toString('hex')}`;
}

/** A call id for a tool call the upstream sent without one. */
export function newCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

/** The request's settings with OpenAI's defaults filled in, in the order OpenAI lists them. */
export function responseSettings(request: ResponseCreateRequest): ResponseSettings {
  const format: TextFormat = request.text?.format ?? { type: 'text' };
  return {
    background: false,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    max_tool_calls: request.max_tool_calls ?? null,
    model: request.model,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    prompt_cache_key: request.prompt_cache_key ?? null,
    reasoning: request.reasoning ?? null,
    safety_identifier: request.safety_identifier ?? null,
    service_tier: request.service_tier ?? 'default',
    store: request.store ?? true,
    temperature: request.temperature ?? 1,
    text: { format, ...(request.text?.verbosity ? { verbosity: request.text.verbosity } : {}) },
    tool_choice: request.tool_choice ?? 'auto',
    tools: (request.tools ?? []).map((tool) => ({
      type: 'function',
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      strict: tool.strict ?? null,
    })),
    top_logprobs: request.top_logprobs ?? 0,
    top_p: request.top_p ?? 1,
    truncation: request.truncation ?? 'disabled',
    ...(request.user !== undefined ? { user: request.user } : {}),
    metadata: request.metadata ?? {},
  };
}

export interface ResponseState {
  id: string;
  createdAt: number;
  status: ResponseStatus;
  output: OutputItem[];
  usage?: ResponseUsage | undefined;
  error?: ResponseError | null;
  incomplete?: IncompleteDetails | null;
  citations?: Citation[] | undefined;
}

export function responseObject(settings: ResponseSettings, state: ResponseState): ResponseObject {
  const { model, ...rest } = settings;
  return {
    id: state.id,
    object: 'response',
    created_at: state.createdAt,
    status: state.status,
    completed_at: state.status === 'completed' ? nowSeconds() : null,
    error: state.error ?? null,
    incomplete_details: state.incomplete ?? null,
    model,
    output: state.output,
    ...rest,
    ...(state.usage ? { usage: state.usage } : {}),
    ...(state.citations && state.citations.length > 0 ? { citations: state.citations } : {}),
  };
}

/** How a finish reason of the chat upstream ends a response. */
export function endOf(finishReason: string | null): { status: 'completed' | 'incomplete'; incomplete: IncompleteDetails | null } {
  if (finishReason === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } };
  return { status: 'completed', incomplete: null };
}

export function toResponseUsage(usage: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | null | undefined): ResponseUsage {
  const input = usage?.prompt_tokens ?? 0;
  const output = usage?.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage?.total_tokens ?? input + output,
  };
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
