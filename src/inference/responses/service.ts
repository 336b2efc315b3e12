import type { Db } from '../../db/database.ts';
import { TroupeError, notFound } from '../../errors.ts';
import type { ChatCompletionService } from '../chat.ts';
import type { OutChunk } from '../wire.ts';
import { newResponseId, nowSeconds, responseObject, responseSettings, type ResponseObject, type ResponseSettings } from './objects.ts';
import type { InputItem, ResponseCreateRequest } from './schemas.ts';
import { deleteResponse, findItem, findResponse, insertResponse } from './store.ts';
import { ResponseStreamTranslator, type ResponseEvent } from './stream.ts';
import { fromCompletion, toChatRequest, type ContextItem } from './translate.ts';

/** One request's response before it is generated. */
interface Turn {
  id: string;
  createdAt: number;
  settings: ResponseSettings;
  /** The input as sent, stored as such. */
  input: InputItem[];
  /** The whole context: earlier responses' items and output, then this input (references resolved). */
  history: ContextItem[];
  /** Where this request's input starts in `history`. */
  firstInput: number;
}

export interface ResponseEventStream {
  events: AsyncIterable<ResponseEvent>;
  /** Ends the upstream request early (client gone). */
  cancel(): void;
}

export interface DeletedResponse {
  id: string;
  object: 'response.deleted';
  deleted: true;
}

/**
 * OpenAI's Responses API on top of chat completions: each request is translated to a chat
 * request and answered by ChatCompletionService (so a character as `model` gets its persona,
 * documents and capabilities exactly as in /v1/chat/completions), the reply is translated back,
 * and responses are kept per project for `previous_response_id` unless `store` is false.
 */
export class ResponsesService {
  readonly #db: Db;
  readonly #chat: ChatCompletionService;

  constructor(options: { db: Db; chat: ChatCompletionService }) {
    this.#db = options.db;
    this.#chat = options.chat;
  }

  async create(projectId: string, request: ResponseCreateRequest, signal: AbortSignal): Promise<ResponseObject> {
    const turn = await this.#prepare(projectId, request);
    const completion = await this.#chat.complete(projectId, toChatRequest(request, turn.history, turn.firstInput, false), signal);
    const result = fromCompletion(completion);
    const response = responseObject(turn.settings, {
      id: turn.id,
      createdAt: turn.createdAt,
      status: result.status,
      incomplete: result.incomplete,
      output: result.output,
      usage: result.usage,
      citations: result.citations,
    });
    await this.#store(projectId, turn, response);
    return response;
  }

  /**
   * Resolves once the upstream's first chunk arrived: until then failures are plain HTTP errors.
   * Later failures end the events with `error` and response.failed, and go to `onFailure`.
   */
  async stream(projectId: string, request: ResponseCreateRequest, signal: AbortSignal, onFailure: (err: unknown) => void): Promise<ResponseEventStream> {
    const turn = await this.#prepare(projectId, request);
    const { chunks, cancel } = await this.#chat.stream(projectId, toChatRequest(request, turn.history, turn.firstInput, true), signal);
    return { events: this.#events(projectId, turn, chunks, signal, onFailure), cancel };
  }

  async get(projectId: string, id: string): Promise<ResponseObject> {
    const stored = await findResponse(this.#db, projectId, id);
    if (!stored) throw notFound('response', id);
    return stored.response;
  }

  async delete(projectId: string, id: string): Promise<DeletedResponse> {
    if (!(await deleteResponse(this.#db, projectId, id))) throw notFound('response', id);
    return { id, object: 'response.deleted', deleted: true };
  }

  async *#events(projectId: string, turn: Turn, chunks: AsyncIterable<OutChunk>, signal: AbortSignal, onFailure: (err: unknown) => void): AsyncGenerator<ResponseEvent> {
    const translator = new ResponseStreamTranslator((state) => responseObject(turn.settings, { id: turn.id, createdAt: turn.createdAt, ...state }));
    yield* translator.start();
    let last: ResponseEvent;
    try {
      for await (const chunk of chunks) yield* translator.accept(chunk);
      yield* translator.finish();
      const end = translator.end();
      // Stored before the last event, so a GET right after response.completed finds it.
      await this.#store(projectId, turn, end.response);
      last = end.event;
    } catch (err) {
      if (signal.aborted) return; // the client left: nobody to tell
      onFailure(err);
      const failed = translator.fail(err);
      try {
        await this.#store(projectId, turn, failed.response);
      } catch (storeErr) {
        onFailure(storeErr);
      }
      yield* failed.events;
      return;
    }
    yield last;
  }

  async #prepare(projectId: string, request: ResponseCreateRequest): Promise<Turn> {
    const previousId = request.previous_response_id;
    const previous = previousId ? await findResponse(this.#db, projectId, previousId) : undefined;
    if (previousId && !previous) {
      throw new TroupeError('not_found', `Previous response with id '${previousId}' not found.`, {
        param: 'previous_response_id',
        detailCode: 'previous_response_not_found',
      });
    }
    const prior: ContextItem[] = previous ? [...previous.history, ...previous.output] : [];
    const input = request.input ?? [];
    if (input.length === 0 && !previous) {
      throw new TroupeError('invalid_request', "Missing required parameter: 'input'.", { param: 'input', detailCode: 'missing_parameter' });
    }
    const resolved = await this.#resolveReferences(projectId, input, prior);
    return {
      id: newResponseId(),
      createdAt: nowSeconds(),
      settings: responseSettings(request),
      input,
      history: [...prior, ...resolved],
      firstInput: prior.length,
    };
  }

  /** `item_reference`s become the items they name: from this context first, else any stored response of the project. */
  async #resolveReferences(projectId: string, input: InputItem[], prior: ContextItem[]): Promise<ContextItem[]> {
    const resolved: ContextItem[] = [];
    for (const [i, item] of input.entries()) {
      if (item.type !== 'item_reference') {
        resolved.push(item);
        continue;
      }
      const found = [...prior, ...resolved].find((known) => 'id' in known && known.id === item.id) ?? (await findItem(this.#db, projectId, item.id));
      if (!found) {
        throw new TroupeError('not_found', `Item with id '${item.id}' not found.`, { param: `input[${i}].id`, detailCode: 'item_not_found' });
      }
      resolved.push(found);
    }
    return resolved;
  }

  async #store(projectId: string, turn: Turn, response: ResponseObject): Promise<void> {
    if (!turn.settings.store) return;
    await insertResponse(this.#db, projectId, {
      id: response.id,
      model: turn.settings.model,
      input: turn.input,
      history: turn.history,
      output: response.output,
      response,
    });
  }
}
