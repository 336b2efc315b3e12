import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingsConfig } from '../../src/config.ts';
import { PackedChunks } from '../../src/documents/packed-chunks.ts';
import { TroupeError } from '../../src/errors.ts';
import { Embedder } from '../../src/retrieval/embeddings.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/openai/fake-upstream.ts';
import { embedding } from '../support/openai/wire.ts';

const KEY = 'embeddings-test-key';
const logger = pino({ level: 'silent' });
let upstream: FakeUpstream;

function config(overrides: Partial<EmbeddingsConfig> = {}): EmbeddingsConfig {
  return { baseUrl: upstream.url, apiKey: KEY, model: 'fake-embed-1', dimensions: undefined, batchSize: 64, ...overrides };
}

beforeAll(async () => {
  upstream = await startFakeUpstream({ requireApiKey: KEY, embeddingDimensions: 12 });
});
afterAll(async () => {
  await upstream.close();
});

describe('Embedder', () => {
  it('is not configured without a model or a server, and says what to set', async () => {
    for (const embedder of [new Embedder(config({ model: undefined }), logger), new Embedder(config({ baseUrl: undefined }), logger)]) {
      expect(embedder.configured).toBe(false);
      await expect(embedder.embed(['x'])).rejects.toThrow(TroupeError);
      await expect(embedder.embed(['x'])).rejects.toThrow(/EMBEDDINGS_MODEL/);
    }
  });

  it('embeds in batches of EMBEDDINGS_BATCH_SIZE and keeps the texts order', async () => {
    const before = upstream.requests.length;
    const embedder = new Embedder(config({ batchSize: 2 }), logger);
    expect(embedder).toMatchObject({ configured: true, model: 'fake-embed-1', dimensions: undefined });
    const texts = ['one', 'two', 'three', 'four', 'five'];
    const vectors = await embedder.embed(texts);
    expect(vectors).toEqual(texts.map((t) => embedding(t, 12)));
    const sent = upstream.requests.slice(before);
    // Up to three batches are in flight at once, so they may arrive in any order.
    expect(sent.map((r) => [r.path, (r.body as { input: string[] }).input]).sort()).toEqual([
      ['/v1/embeddings', ['five']],
      ['/v1/embeddings', ['one', 'two']],
      ['/v1/embeddings', ['three', 'four']],
    ]);
    expect(sent.every((r) => r.headers.authorization === `Bearer ${KEY}` && !('dimensions' in (r.body as object)))).toBe(true);
  });

  it("embeds a document's packed chunks a batch at a time, in order", async () => {
    const before = upstream.requests.length;
    const texts = ['quay', 'ferry', 'brig', 'sloop', 'café'];
    const packed = PackedChunks.from(texts.map((content, ordinal) => ({ ordinal, content, tokenCount: 1, page: null, headingPath: [], startOffset: 0, endOffset: 0 })));
    const vectors = await new Embedder(config({ batchSize: 2 }), logger).embed(packed);
    expect(vectors).toEqual(texts.map((t) => embedding(t, 12)));
    const inputs = upstream.requests.slice(before).map((r) => (r.body as { input: string[] }).input);
    expect(inputs.sort()).toEqual([['brig', 'sloop'], ['café'], ['quay', 'ferry']]);
  });

  it('asks for EMBEDDINGS_DIMENSIONS when set', async () => {
    const before = upstream.requests.length;
    const vectors = await new Embedder(config({ dimensions: 5 }), logger).embed(['a harbour']);
    expect(vectors).toEqual([embedding('a harbour', 5)]);
    expect(upstream.requests[before]?.body).toMatchObject({ dimensions: 5, encoding_format: 'float' });
  });

  it('embeds a query text once within the cache lifetime, per Embedder (model and settings)', async () => {
    const before = upstream.requests.length;
    const embedder = new Embedder(config(), logger);
    const first = await embedder.embedQuery('where is the lighthouse keeper?');
    expect(await embedder.embedQuery('where is the lighthouse keeper?')).toEqual(first);
    expect(upstream.requests.length - before).toBe(1);
    // Another model's vectors are never served from this one's cache.
    const other = new Embedder(config({ dimensions: 5 }), logger);
    expect(await other.embedQuery('where is the lighthouse keeper?')).toEqual(embedding('where is the lighthouse keeper?', 5));
    expect(upstream.requests.length - before).toBe(2);
  });

  it('stops when the signal aborts', async () => {
    await expect(new Embedder(config(), logger).embed(['x'], AbortSignal.abort())).rejects.toThrow(/abort/i);
  });
});
