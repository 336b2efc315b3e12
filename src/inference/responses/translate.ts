import { TroupeError } from '../../errors.ts';
import type { Citation } from '../../retrieval/knowledge.ts';
import type { ChatCompletionRequest, ChatMessage } from '../schemas.ts';
import {
  endOf,
  newCallId,
  newFunctionCallId,
  newMessageId,
  toResponseUsage,
  type IncompleteDetails,
  type OutputItem,
  type OutputMessage,
  type ResponseUsage,
} from './objects.ts';
import type { ContentPart, InputItem, ResponseCreateRequest } from './schemas.ts';

/**
 * Translation between the Responses API and chat completions: the request becomes a chat
 * request for ChatCompletionService (which adds a character's persona, documents and
 * capabilities), and the chat completion becomes the response's output items.
 */

/** An item of a response's context: what callers sent (references resolved) and what responses produced. */
export type ContextItem = Exclude<InputItem, { type: 'item_reference' }>;

type AssistantMessage = Extract<ChatMessage, { role: 'assistant' }>;
type ToolCall = NonNullable<AssistantMessage['tool_calls']>[number];
type UserContent = Extract<ChatMessage, { role: 'user' }>['content'];

/**
 * The chat request for a response. `items` is the whole context, oldest first; items from
 * `firstInput` on are this request's `input` (named in errors as `input[i]`).
 */
export function toChatRequest(request: ResponseCreateRequest, items: readonly ContextItem[], firstInput: number, stream: boolean): ChatCompletionRequest {
  const messages: ChatMessage[] = [
    // The instructions of this request only: OpenAI does not carry them over to follow-ups.
    ...(request.instructions ? [{ role: 'system' as const, content: request.instructions }] : []),
    ...toChatMessages(items, firstInput),
  ];
  if (messages.length === 0) {
    throw new TroupeError('invalid_request', "Missing required parameter: 'input'.", { param: 'input', detailCode: 'missing_parameter' });
  }
  const tools = (request.tools ?? []).map((tool) => ({
    type: 'function' as const,
    function: {
      name: tool.name,
      ...(tool.description != null ? { description: tool.description } : {}),
      ...(tool.parameters != null ? { parameters: tool.parameters } : {}),
      ...(tool.strict != null ? { strict: tool.strict } : {}),
    },
  }));
  const choice = request.tool_choice;
  const format = request.text?.format;
  return {
    model: request.model,
    messages,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
    ...(request.temperature != null ? { temperature: request.temperature } : {}),
    ...(request.top_p != null ? { top_p: request.top_p } : {}),
    // max_tokens rather than max_completion_tokens: Ollama and LM Studio know only the former
    // and would silently ignore the latter, while OpenAI's non-reasoning models take both.
    ...(request.max_output_tokens != null ? { max_tokens: request.max_output_tokens } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    // 'auto' without tools of the caller's is the default anyway, and some servers refuse a
    // tool_choice without tools; a character's capabilities are offered with 'auto' regardless.
    ...(choice !== undefined && !(choice === 'auto' && tools.length === 0)
      ? { tool_choice: typeof choice === 'string' ? choice : { type: 'function' as const, function: { name: choice.name } } }
      : {}),
    ...(tools.length > 0 && request.parallel_tool_calls != null ? { parallel_tool_calls: request.parallel_tool_calls } : {}),
    ...(format && format.type !== 'text'
      ? {
          response_format:
            format.type === 'json_object'
              ? { type: 'json_object' as const }
              : {
                  type: 'json_schema' as const,
                  json_schema: {
                    name: format.name,
                    schema: format.schema,
                    ...(format.description !== undefined ? { description: format.description } : {}),
                    ...(format.strict != null ? { strict: format.strict } : {}),
                  },
                },
        }
      : {}),
    ...(request.text?.verbosity ? { verbosity: request.text.verbosity } : {}),
    ...(request.reasoning?.effort ? { reasoning_effort: request.reasoning.effort } : {}),
    ...(request.user !== undefined ? { user: request.user } : {}),
    ...(request.service_tier ? { service_tier: request.service_tier } : {}),
    ...(request.safety_identifier ? { safety_identifier: request.safety_identifier } : {}),
    ...(request.prompt_cache_key ? { prompt_cache_key: request.prompt_cache_key } : {}),
  };
}

/**
 * Items as chat messages: function calls join the assistant message before them (or make one),
 * their outputs become tool messages, reasoning items are left out.
 */
function toChatMessages(items: readonly ContextItem[], firstInput: number): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let assistant: AssistantMessage | null = null;
  for (const [i, item] of items.entries()) {
    const where = i >= firstInput ? `input[${i - firstInput}]` : 'previous_response_id';
    switch (item.type) {
      case 'message': {
        if (item.role === 'assistant') {
          assistant = assistantMessage(item.content);
          messages.push(assistant);
        } else {
          messages.push({ role: item.role, content: chatContent(item.content, `${where}.content`) } as ChatMessage);
          assistant = null;
        }
        break;
      }
      case 'function_call': {
        const call: ToolCall = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
        if (assistant) assistant.tool_calls = [...(assistant.tool_calls ?? []), call];
        else {
          assistant = { role: 'assistant', content: null, tool_calls: [call] };
          messages.push(assistant);
        }
        break;
      }
      case 'function_call_output':
        messages.push({ role: 'tool', tool_call_id: item.call_id, content: toolOutput(item.output, `${where}.output`) });
        assistant = null;
        break;
      case 'reasoning':
        break;
    }
  }
  for (const message of messages) {
    // A chat assistant message needs content or tool calls.
    if (message.role === 'assistant' && message.content === null && !message.tool_calls) message.content = '';
  }
  return messages;
}

function assistantMessage(content: string | ContentPart[]): AssistantMessage {
  if (typeof content === 'string') return { role: 'assistant', content };
  let text = '';
  let refusal = '';
  for (const part of content) {
    if (part.type === 'input_text' || part.type === 'output_text') text += part.text;
    else if (part.type === 'refusal') refusal += part.refusal;
  }
  return { role: 'assistant', content: text === '' ? null : text, ...(refusal ? { refusal } : {}) };
}

function chatContent(content: string | ContentPart[], where: string): UserContent {
  if (typeof content === 'string') return content;
  const parts = content.map((part, j): Exclude<UserContent, string>[number] => {
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        return { type: 'text', text: part.text };
      case 'refusal':
        return { type: 'text', text: part.refusal };
      case 'input_image': {
        if (!part.image_url) {
          throw new TroupeError('invalid_request', 'Images by file_id are not supported: send image_url (a URL or a data: URL).', {
            param: `${where}[${j}].image_url`,
          });
        }
        const detail = part.detail === 'low' || part.detail === 'high' || part.detail === 'auto' ? { detail: part.detail } : {};
        return { type: 'image_url', image_url: { url: part.image_url, ...detail } };
      }
      case 'input_file': {
        if (part.file_url !== undefined) {
          throw new TroupeError('invalid_request', 'Files by file_url are not supported: send file_data (a data: URL).', { param: `${where}[${j}].file_url` });
        }
        const file = {
          ...(part.file_data !== undefined ? { file_data: part.file_data } : {}),
          ...(part.file_id ? { file_id: part.file_id } : {}),
          ...(part.filename !== undefined ? { filename: part.filename } : {}),
        };
        return { type: 'file', file };
      }
    }
  });
  return parts.length > 0 ? parts : '';
}

function toolOutput(output: string | ContentPart[], where: string): string {
  if (typeof output === 'string') return output;
  return output
    .map((part, j) => {
      if (part.type === 'input_text' || part.type === 'output_text') return part.text;
      throw new TroupeError('invalid_request', 'A function_call_output can hold text parts only.', { param: `${where}[${j}]` });
    })
    .join('');
}

/** The chat completion as ChatCompletionService returns it (wire.ts' normalizeCompletion). */
interface CompletionShape {
  choices?: {
    message?: {
      content?: string | null;
      refusal?: string | null;
      tool_calls?: { id?: string; type?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
  citations?: Citation[];
}

export interface TranslatedCompletion {
  output: OutputItem[];
  status: 'completed' | 'incomplete';
  incomplete: IncompleteDetails | null;
  usage: ResponseUsage;
  citations: Citation[] | undefined;
}

/** A chat completion as a response's output: its text as a message, its tool calls as function calls. */
export function fromCompletion(completion: Record<string, unknown>): TranslatedCompletion {
  const shape = completion as CompletionShape;
  const choice = shape.choices?.[0];
  const message = choice?.message;
  const calls = (message?.tool_calls ?? []).filter((call) => call.type === undefined || call.type === 'function');
  const end = endOf(choice?.finish_reason ?? null);
  const output: OutputItem[] = [];
  const text = message?.content ?? '';
  const refusal = message?.refusal ?? '';
  if (refusal || text || calls.length === 0) {
    const item: OutputMessage = { type: 'message', id: newMessageId(), role: 'assistant', status: 'completed', content: [] };
    if (text || !refusal) item.content.push({ type: 'output_text', text, annotations: [], logprobs: [] });
    if (refusal) item.content.push({ type: 'refusal', refusal });
    output.push(item);
  }
  for (const call of calls) {
    output.push({
      type: 'function_call',
      id: newFunctionCallId(),
      call_id: call.id || newCallId(),
      name: call.function?.name ?? '',
      arguments: call.function?.arguments ?? '',
      status: 'completed',
    });
  }
  const last = output.at(-1);
  if (end.status === 'incomplete' && last) last.status = 'incomplete';
  return { output, ...end, usage: toResponseUsage(shape.usage), citations: shape.citations };
}
