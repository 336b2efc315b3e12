import OpenAI from 'openai';
import type { Logger } from 'pino';
import type { EmbeddingsConfig } from '../config.ts';
import type { ChunkList } from '../documents/packed-chunks.ts';
import { TroupeError } from '../errors.ts';
import { QueryEmbeddingCache } from './query-embedding-cache.ts';

/** Per request; embedding a full batch of chunks on a CPU-only local server can take a while. */
const REQUEST_TIMEOUT_MS = 120_000;
/** The SDK retries connection failures, 408/409/429 and 5xx with backoff. */
const MAX_RETRIES = 2;
/** Batches of one document's chunks in flight at once: the server works while replies travel. */
const BATCHES_IN_FLIGHT = 3;
/** Query embeddings kept per Embedder (one model and configuration), and for how long. */
const QUERY_CACHE_ENTRIES = 2_000;
const QUERY_CACHE_TTL_MS = 10 * 60_000;

/**
 * Turns texts into vectors through any OpenAI-compatible `/embeddings` endpoint. Without a
 * model (EMBEDDINGS_MODEL) it is not configured and documents are searched by full text only.
 */
export class Embedder {
  readonly configured: boolean;
  readonly model: string | undefined;
  readonly dimensions: number | undefined;
  readonly #client: OpenAI | null;
  readonly #batchSize: number;
  readonly #logger: Logger;
  readonly #queries = new QueryEmbeddingCache({ maxEntries: QUERY_CACHE_ENTRIES, ttlMs: QUERY_CACHE_TTL_MS });

  constructor(config: EmbeddingsConfig, logger: Logger) {
    this.#logger = logger;
    this.#batchSize = config.batchSize;
    this.model = config.model;
    this.dimensions = config.dimensions;
    this.#client =
      config.baseUrl && config.model
        ? new OpenAI({ baseURL: config.baseUrl, apiKey: config.apiKey ?? 'unused', timeout: REQUEST_TIMEOUT_MS, maxRetries: MAX_RETRIES })
        : null;
    this.configured = this.#client !== null;
  }

  /** The vector of a player's query; the same text within QUERY_CACHE_TTL_MS is not sent again. */
  async embedQuery(text: string, signal?: AbortSignal): Promise<number[]> {
    const cached = this.#queries.get(text);
    if (cached) return cached;
    const [vector] = await this.embed([text], signal);
    if (!vector) throw new Error('the embeddings server returned no vector');
    this.#queries.set(text, vector);
    return vector;
  }

  /**
   * One vector per text, in order, all of the same length; up to BATCHES_IN_FLIGHT batches at
   * once. A document's chunks are read a batch at a time, so their texts are decoded as sent.
   */
  async embed(texts: readonly string[] | Pick<ChunkList, 'length' | 'contents'>, signal?: AbortSignal): Promise<number[][]> {
    const client = this.#client;
    const model = this.model;
    if (!client || !model) {
      throw new TroupeError('upstream_unavailable', 'No embeddings model is configured: set EMBEDDINGS_MODEL.', { detailCode: 'embeddings_not_configured' });
    }
    const size = this.#batchSize;
    const batchAt = (i: number): string[] => ('contents' in texts ? texts.contents(i * size, (i + 1) * size) : texts.slice(i * size, (i + 1) * size));
    const batchCount = Math.ceil(texts.length / size);
    const results: number[][][] = new Array(batchCount);
    let next = 0;
    let failed = false;
    const worker = async () => {
      // After one batch fails the whole call fails: the other workers take no further batches.
      for (let i = next++; i < batchCount && !failed; i = next++) {
        const batch = batchAt(i);
        const response = await client.embeddings.create(
          {
            model,
            input: batch,
            // Floats, not the SDK's default base64: some OpenAI-compatible servers only do floats.
            encoding_format: 'float',
            ...(this.dimensions === undefined ? {} : { dimensions: this.dimensions }),
          },
          { signal },
        );
        const ordered = [...response.data].sort((a, b) => a.index - b.index);
        if (ordered.length !== batch.length) {
          throw new Error(`the embeddings server returned ${ordered.length} vectors for ${batch.length} texts`);
        }
        results[i] = ordered.map((item) => item.embedding);
      }
    };
    const guarded = () =>
      worker().catch((err: unknown) => {
        failed = true;
        throw err;
      });
    await Promise.all(Array.from({ length: Math.min(BATCHES_IN_FLIGHT, batchCount) }, guarded));
    const vectors = results.flat();
    this.#check(vectors);
    this.#logger.debug({ texts: texts.length, model }, 'texts embedded');
    return vectors;
  }

  /** Vectors of another size than the index expects would be unsearchable, so refuse them here. */
  #check(vectors: number[][]): void {
    const expected = this.dimensions ?? vectors[0]?.length;
    const wrong = vectors.find((v) => v.length !== expected || v.length === 0);
    if (wrong) {
      const hint = this.dimensions === undefined ? '' : ' (EMBEDDINGS_DIMENSIONS)';
      throw new Error(`the embeddings server returned a vector of ${wrong.length} dimensions; expected ${expected}${hint}`);
    }
  }
}
