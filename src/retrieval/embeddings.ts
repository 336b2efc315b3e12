import OpenAI from 'openai';
import type { Logger } from 'pino';
import type { EmbeddingsConfig } from '../config.ts';
import { TroupeError } from '../errors.ts';

/** Per request; embedding a full batch of chunks on a CPU-only local server can take a while. */
const REQUEST_TIMEOUT_MS = 120_000;
/** The SDK retries connection failures, 408/409/429 and 5xx with backoff. */
const MAX_RETRIES = 2;

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

  /** One vector per text, in order, all of the same length; batches go one after another. */
  async embed(texts: string[], signal?: AbortSignal): Promise<number[][]> {
    const client = this.#client;
    if (!client || !this.model) {
      throw new TroupeError('upstream_unavailable', 'No embeddings model is configured: set EMBEDDINGS_MODEL.', { detailCode: 'embeddings_not_configured' });
    }
    const vectors: number[][] = [];
    for (let from = 0; from < texts.length; from += this.#batchSize) {
      const batch = texts.slice(from, from + this.#batchSize);
      const response = await client.embeddings.create(
        {
          model: this.model,
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
      for (const item of ordered) vectors.push(item.embedding);
    }
    this.#check(vectors);
    this.#logger.debug({ texts: texts.length, model: this.model }, 'texts embedded');
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
