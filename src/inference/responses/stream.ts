import { TroupeError } from '../../errors.ts';
import type { OutChunk, Usage } from '../wire.ts';
import {
  endOf,
  newCallId,
  newFunctionCallId,
  newMessageId,
  toResponseUsage,
  type FunctionCallOutput,
  type OutputItem,
  type OutputMessage,
  type OutputTextPart,
  type RefusalPart,
  type ResponseError,
  type ResponseObject,
  type ResponseState,
} from './objects.ts';

/** A Responses stream event; `sequence_number` counts from 0 within one response. */
export type ResponseEvent = { type: string; sequence_number: number } & Record<string, unknown>;

interface OpenMessage {
  kind: 'message';
  index: number;
  item: OutputMessage;
  part: { index: number; value: OutputTextPart | RefusalPart } | null;
}

interface OpenCall {
  kind: 'call';
  index: number;
  item: FunctionCallOutput;
}

interface ToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/**
 * Turns the chat chunks of ChatCompletionService into the Responses stream: the response is
 * created, then each output item is added, filled by deltas and done before the next one
 * starts (text as a message, each tool call as a function call), and the response completes.
 * Each method yields the events its input causes; the final response is built by `end`.
 */
export class ResponseStreamTranslator {
  readonly #build: (state: Omit<ResponseState, 'id' | 'createdAt'>) => ResponseObject;
  readonly #output: OutputItem[] = [];
  /** Output items of tool calls by the upstream's tool-call index. */
  readonly #calls = new Map<number, FunctionCallOutput>();
  #open: OpenMessage | OpenCall | null = null;
  #sequence = 0;
  #finishReason: string | null = null;
  #usage: Usage | null = null;

  constructor(build: (state: Omit<ResponseState, 'id' | 'createdAt'>) => ResponseObject) {
    this.#build = build;
  }

  *start(): Generator<ResponseEvent> {
    const response = this.#build({ status: 'in_progress', output: [] });
    yield this.#event('response.created', { response });
    yield this.#event('response.in_progress', { response });
  }

  *accept(chunk: OutChunk): Generator<ResponseEvent> {
    if (chunk.usage) this.#usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.index !== 0) continue; // a response has one answer; n is never asked for
      const delta = choice.delta;
      if (typeof delta.content === 'string' && delta.content !== '') yield* this.#text('output_text', delta.content);
      if (typeof delta.refusal === 'string' && delta.refusal !== '') yield* this.#text('refusal', delta.refusal);
      if (Array.isArray(delta.tool_calls)) {
        for (const call of delta.tool_calls as ToolCallDelta[]) yield* this.#toolCall(call);
      }
      if (choice.finish_reason) this.#finishReason = choice.finish_reason;
    }
  }

  /** Closes the open item; then `end` gives the final response and its event. */
  *finish(): Generator<ResponseEvent> {
    yield* this.#close(endOf(this.#finishReason).status === 'incomplete' ? 'incomplete' : 'completed');
  }

  /** The last event: response.completed, or response.incomplete when the output was cut. */
  end(citations?: ResponseState['citations']): { response: ResponseObject; event: ResponseEvent } {
    const { status, incomplete } = endOf(this.#finishReason);
    const response = this.#build({ status, incomplete, output: this.#output, usage: toResponseUsage(this.#usage), citations });
    return { response, event: this.#event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }) };
  }

  /** After a failure mid-stream: an `error` event, then response.failed with the output so far. */
  fail(err: unknown): { response: ResponseObject; events: ResponseEvent[] } {
    if (this.#open) this.#open.item.status = 'incomplete';
    this.#open = null;
    const troupe = err instanceof TroupeError ? err : null;
    const message = troupe?.message ?? 'The response failed: the server had an error while generating it.';
    const error: ResponseError = { code: troupe?.code === 'rate_limited' ? 'rate_limit_exceeded' : 'server_error', message };
    const response = this.#build({ status: 'failed', error, output: this.#output, ...(this.#usage ? { usage: toResponseUsage(this.#usage) } : {}) });
    return {
      response,
      events: [
        this.#event('error', { code: troupe?.detailCode ?? 'internal_error', message, param: troupe?.param ?? null }),
        this.#event('response.failed', { response }),
      ],
    };
  }

  *#text(kind: 'output_text' | 'refusal', delta: string): Generator<ResponseEvent> {
    let open = this.#open;
    if (open?.kind !== 'message') {
      yield* this.#close('completed');
      const item: OutputMessage = { type: 'message', id: newMessageId(), role: 'assistant', status: 'in_progress', content: [] };
      open = { kind: 'message', index: this.#output.length, item, part: null };
      this.#open = open;
      this.#output.push(item);
      yield this.#event('response.output_item.added', { output_index: open.index, item: structuredClone(item) });
    }
    const ids = { item_id: open.item.id, output_index: open.index };
    if (open.part?.value.type !== kind) {
      yield* this.#closePart(open);
      const value: OutputTextPart | RefusalPart = kind === 'output_text' ? { type: 'output_text', text: '', annotations: [], logprobs: [] } : { type: 'refusal', refusal: '' };
      open.part = { index: open.item.content.length, value };
      open.item.content.push(value);
      yield this.#event('response.content_part.added', { ...ids, content_index: open.part.index, part: structuredClone(value) });
    }
    const part = open.part.value;
    if (part.type === 'output_text') {
      part.text += delta;
      yield this.#event('response.output_text.delta', { ...ids, content_index: open.part.index, delta, logprobs: [] });
    } else {
      part.refusal += delta;
      yield this.#event('response.refusal.delta', { ...ids, content_index: open.part.index, delta });
    }
  }

  *#toolCall(delta: ToolCallDelta): Generator<ResponseEvent> {
    const key = delta.index ?? 0;
    let item = this.#calls.get(key);
    if (!item) {
      yield* this.#close('completed');
      item = {
        type: 'function_call',
        id: newFunctionCallId(),
        call_id: delta.id || newCallId(),
        name: delta.function?.name ?? '',
        arguments: '',
        status: 'in_progress',
      };
      this.#calls.set(key, item);
      this.#open = { kind: 'call', index: this.#output.length, item };
      this.#output.push(item);
      yield this.#event('response.output_item.added', { output_index: this.#open.index, item: structuredClone(item) });
    } else if (this.#open?.item !== item) {
      // Each item is done before the next starts, so tool calls have to arrive one after another.
      throw new TroupeError('upstream_error', 'The inference server interleaved the arguments of several tool calls.');
    } else if (!item.name && delta.function?.name) {
      item.name = delta.function.name;
    }
    const args = delta.function?.arguments;
    if (args) {
      item.arguments += args;
      yield this.#event('response.function_call_arguments.delta', { item_id: item.id, output_index: this.#output.indexOf(item), delta: args });
    }
  }

  *#closePart(open: OpenMessage): Generator<ResponseEvent> {
    const part = open.part;
    if (!part) return;
    const ids = { item_id: open.item.id, output_index: open.index, content_index: part.index };
    if (part.value.type === 'output_text') yield this.#event('response.output_text.done', { ...ids, text: part.value.text, logprobs: [] });
    else yield this.#event('response.refusal.done', { ...ids, refusal: part.value.refusal });
    yield this.#event('response.content_part.done', { ...ids, part: structuredClone(part.value) });
    open.part = null;
  }

  *#close(status: 'completed' | 'incomplete'): Generator<ResponseEvent> {
    const open = this.#open;
    if (!open) return;
    if (open.kind === 'message') {
      yield* this.#closePart(open);
    } else {
      const { id, name, arguments: args } = open.item;
      yield this.#event('response.function_call_arguments.done', { item_id: id, output_index: open.index, name, arguments: args });
    }
    open.item.status = status;
    this.#open = null;
    yield this.#event('response.output_item.done', { output_index: open.index, item: structuredClone(open.item) });
  }

  #event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, ...fields, sequence_number: this.#sequence++ };
  }
}
