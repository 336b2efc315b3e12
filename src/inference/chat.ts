import type { ChatCompletionCreateParams } from 'openai/resources/chat/completions';
import type { Capability } from '../capabilities/schemas.ts';
import type { CapabilityService } from '../capabilities/service.ts';
import type { Character } from '../characters/schemas.ts';
import type { CharacterService } from '../characters/service.ts';
import { TroupeError } from '../errors.ts';
import { ID_PREFIX } from '../ids.ts';
import { buildCharacterSystemPrompt, capabilityTools, mergeTools } from '../prompt/character-prompt.ts';
import type { Knowledge, Retrieved } from '../retrieval/knowledge.ts';
import { lastPlayerText } from './character-turn.ts';
import type { ChatCompletionRequest } from './schemas.ts';
import type { UpstreamModel } from './upstream.ts';
import type { InferenceUpstream, UpstreamStream } from './upstream.ts';
import { ChunkNormalizer, normalizeCompletion, type OutChunk } from './wire.ts';

/** What a `model` value names: a character of the caller's project, or an upstream model. */
export type ChatTarget =
  | { kind: 'character'; character: Character; capabilities: Capability[] }
  | { kind: 'upstream'; model: string };

export interface ModelObject {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

/**
 * A started /v1 stream, consumed one way: as chunk objects (`chunks`, for the Responses API), or
 * as SSE text written as it arrives (`pipe`, the chat completions hot path).
 */
export interface ChunkStream {
  chunks: AsyncIterable<OutChunk>;
  /**
   * Writes `data: <chunk>` events, batched per arrival, then `data: [DONE]`; resolves true once
   * complete, false when `write` answered false (the client left). Upstream failures throw.
   */
  pipe(write: (text: string) => boolean | Promise<boolean>): Promise<boolean>;
  cancel(): void;
}

/**
 * Chat completions for /v1: a character id as `model` gets the character's system prompt and
 * its capabilities as tools, sent to INFERENCE_MODEL; any model the upstream lists is proxied.
 */
export class ChatCompletionService {
  readonly #upstream: InferenceUpstream;
  readonly #characters: CharacterService;
  readonly #capabilities: CapabilityService;
  readonly #knowledge: Knowledge;

  constructor(options: { upstream: InferenceUpstream; characters: CharacterService; capabilities: CapabilityService; knowledge: Knowledge }) {
    this.#upstream = options.upstream;
    this.#characters = options.characters;
    this.#capabilities = options.capabilities;
    this.#knowledge = options.knowledge;
  }

  async listModels(projectId: string): Promise<ModelObject[]> {
    const [upstream, characters] = await Promise.all([this.#upstream.listModels(), this.#characters.listAll(projectId)]);
    return [...upstream.map(toModelObject), ...characters.map((c) => characterModel(c))];
  }

  async getModel(projectId: string, model: string): Promise<ModelObject> {
    const target = await this.resolve(projectId, model);
    if (target.kind === 'character') return characterModel(target.character);
    const found = (await this.#upstream.listModels()).find((m) => m.id === model);
    if (!found) throw modelNotFound(model);
    return toModelObject(found);
  }

  async resolve(projectId: string, model: string): Promise<ChatTarget> {
    if (model.startsWith(ID_PREFIX.character)) {
      let character: Character;
      try {
        character = await this.#characters.get(projectId, model);
      } catch (err) {
        if (err instanceof TroupeError && err.code === 'not_found') throw modelNotFound(model);
        throw err;
      }
      const capabilities = await this.#capabilities.getMany(projectId, character.capabilityGroupIds);
      return { kind: 'character', character, capabilities };
    }
    if (!this.#upstream.configured) throw modelNotFound(model);
    const listed = await this.#upstream.listModels();
    if (!listed.some((m) => m.id === model)) throw modelNotFound(model);
    return { kind: 'upstream', model };
  }

  async complete(projectId: string, request: ChatCompletionRequest, signal: AbortSignal): Promise<Record<string, unknown>> {
    const target = await this.resolve(projectId, request.model);
    const retrieved = await this.#retrieve(projectId, target, request, signal);
    const params = this.#params(target, request, retrieved);
    const completion = await this.#upstream.complete({ ...params, stream: false }, signal);
    const reply = normalizeCompletion(completion, request.model);
    // An addition to OpenAI's format, present when the character's documents were used.
    return retrieved.citations.length > 0 ? { ...reply, citations: retrieved.citations } : reply;
  }

  /** Resolves when the upstream's first chunk arrived: until then failures are plain HTTP errors. */
  async stream(projectId: string, request: ChatCompletionRequest, signal: AbortSignal): Promise<ChunkStream> {
    const target = await this.resolve(projectId, request.model);
    const params = this.#params(target, request, await this.#retrieve(projectId, target, request, signal));
    const includeUsage = request.stream_options?.include_usage === true;
    const upstream = await this.#upstream.stream(
      { ...params, stream: true, stream_options: { ...(request.stream_options ?? {}), include_usage: true } },
      signal,
    );
    const normalizer = new ChunkNormalizer({ model: request.model, includeUsage });
    const source = this.#upstream;
    const pipe = async (write: (text: string) => boolean | Promise<boolean>): Promise<boolean> => {
      let text = '';
      const emit = (json: string) => (text += `data: ${json}\n\n`);
      // A promise only while the client's socket drains: most chunks go out without one.
      const flush = (): boolean | Promise<boolean> => {
        if (text === '') return true;
        const sent = write(text);
        text = '';
        return sent;
      };
      try {
        normalizer.accept(upstream.first, emit);
        const sent = flush();
        if (sent === false || (sent !== true && !(await sent))) return false;
        // Each later chunk is rewritten and written within the read that brought it.
        if (!(await upstream.rest.pump((chunk) => normalizer.accept(chunk, emit), flush))) return false;
      } catch (err) {
        upstream.cancel();
        throw source.mapError(err, signal);
      }
      upstream.release();
      // The last arrival (finish_reason) leaves in one write with the usage and [DONE].
      normalizer.finish(emit);
      text += 'data: [DONE]\n\n';
      return flush();
    };
    return { chunks: normalizedChunks(source, upstream, normalizer, signal), pipe, cancel: upstream.cancel };
  }

  /** The upstream request: for a character, its prompt first and its capabilities as tools. */
  /** A character's documents, retrieved for the caller's last user message. */
  #retrieve(projectId: string, target: ChatTarget, request: ChatCompletionRequest, signal: AbortSignal): Promise<Retrieved> {
    if (target.kind !== 'character') return Promise.resolve({ snippets: [], citations: [] });
    const history = request.messages as Parameters<typeof lastPlayerText>[0];
    return this.#knowledge.retrieve(projectId, target.character.id, lastPlayerText(history), signal);
  }

  #params(target: ChatTarget, request: ChatCompletionRequest, retrieved: Retrieved): ChatCompletionCreateParams {
    const { stream: _stream, stream_options: _options, ...rest } = request;
    if (target.kind === 'upstream') return rest as ChatCompletionCreateParams;
    const tools = mergeTools(capabilityTools(target.capabilities), request.tools ?? []);
    checkToolChoice(request, tools.map((t) => t.function.name));
    const system = buildCharacterSystemPrompt({ character: target.character, capabilities: target.capabilities, knowledge: retrieved.snippets });
    return {
      ...rest,
      model: this.#upstream.characterModel(),
      messages: [{ role: 'system', content: system }, ...request.messages],
      ...(tools.length > 0 ? { tools } : {}),
    } as ChatCompletionCreateParams;
  }
}

/**
 * The stream as chunk objects. A module-level generator, not one declared per call: every
 * generator function made anew gets a prototype and a hidden class of its own, which young
 * collections keep alive (and promote) with everything the stream held.
 */
async function* normalizedChunks(source: InferenceUpstream, upstream: UpstreamStream, normalizer: ChunkNormalizer, signal: AbortSignal): AsyncGenerator<OutChunk> {
  const out: OutChunk[] = [];
  const emit = (json: string) => out.push(JSON.parse(json) as OutChunk);
  for await (const chunk of source.chunks(upstream, signal)) {
    normalizer.accept(chunk, emit);
    yield* out.splice(0);
  }
  normalizer.finish(emit);
  yield* out;
}

function checkToolChoice(request: ChatCompletionRequest, names: string[]): void {
  const choice = request.tool_choice;
  if (choice === undefined || choice === 'none' || choice === 'auto') return;
  if (names.length === 0) {
    throw new TroupeError('invalid_request', "'tool_choice' needs tools: this request and the character offer none.", { param: 'tool_choice' });
  }
  if (typeof choice === 'object' && !names.includes(choice.function.name)) {
    throw new TroupeError('invalid_request', `'tool_choice' names function '${choice.function.name}', which is not among the tools.`, {
      param: 'tool_choice',
    });
  }
}

function modelNotFound(model: string): TroupeError {
  return new TroupeError('not_found', `The model '${model}' does not exist or you do not have access to it.`, {
    param: 'model',
    detailCode: 'model_not_found',
  });
}

function characterModel(character: Character): ModelObject {
  return {
    id: character.id,
    object: 'model',
    created: Math.floor(Date.parse(character.createdAt) / 1000),
    owned_by: character.projectId,
  };
}

function toModelObject(m: UpstreamModel): ModelObject {
  return { id: m.id, object: 'model', created: m.created, owned_by: m.owned_by };
}
