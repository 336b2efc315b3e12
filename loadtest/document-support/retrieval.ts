/**
 * Part (c) of the documents benchmark: DocumentIndex.search for one character whose documents grow
 * through the `tiers`, in an index shared with `others` characters holding `othersChunks` chunks in
 * all. Chunks are written as the processor writes them (replaceChunks in a transaction, documents
 * `ready`) with clustered unit vectors; the fill rate times those writes. At each tier queries arrive
 * on a fixed schedule (latency counts from the scheduled time), alternating full text and hybrid, in
 * a mix of keyword, question and common-word queries; recall@6 of the vector list is checked against
 * exact cosine.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { openDatabase, type Db } from '../../src/db/database.ts';
import { characters, documents, projects } from '../../src/db/schema.ts';
import type { Chunk } from '../../src/documents/chunker.ts';
import { newId } from '../../src/ids.ts';
import { openDocumentIndex } from '../../src/retrieval/document-index.ts';
import { vectorHits } from '../../src/retrieval/vector-search.ts';
import type { Log } from '../support/children.ts';
import { percentile, sortedCopy } from '../support/report.ts';
import { freshStore } from '../support/troupe.ts';
import type { Backend } from './ingest.ts';
import { FUNCTION_WORDS, seededRandom, vocabulary, WordSampler } from './text.ts';

export interface RetrievalOptions {
  backend: Backend;
  databaseUrl: string;
  tiers: number[];
  others: number;
  othersChunks: number;
  dimensions: number;
  queries: number;
  ratePerSec: number;
  /** Documents written at once. */
  writers: number;
  log: Log;
}

/** minResults: the fewest results any query returned (6: every query filled its top 6). */
type Latency = { p50: number; p99: number; max: number; minResults: number };
/** latency: mode (`fulltext`, `hybrid`) -> kind (`all`, `keyword`, `question`, `common`) -> latency. */
type TierResult = { chunks: number; total: number; latency: Record<string, Record<string, Latency>>; vectorRecall: number | null };
export type RetrievalResult = Awaited<ReturnType<typeof measureRetrieval>>;

const DOCUMENT_CHUNKS = 1_000;
const TOPICS = 64;
const LIMIT = 6;
const WARMUP = 20;
const RECALL_QUERIES = 30;

/** Topic centres plus noise, normalised: embeddings cluster by subject, as real ones do. */
class VectorSource {
  readonly dims: number;
  readonly #random: () => number;
  readonly #centres: number[][];
  constructor(dims: number, seed: number) {
    this.dims = dims;
    this.#random = seededRandom(seed);
    this.#centres = Array.from({ length: TOPICS }, () => this.#noise(1));
  }

  #noise(scale: number): number[] {
    return Array.from({ length: this.dims }, () => (this.#random() * 2 - 1) * scale);
  }

  next(): number[] {
    const centre = this.#centres[Math.floor(this.#random() * TOPICS)] ?? [];
    const v = this.#noise(0.8).map((x, i) => x + (centre[i] ?? 0));
    const norm = Math.hypot(...v) || 1;
    return v.map((x) => Math.round((x / norm) * 1e4) / 1e4);
  }
}

function makeChunks(sampler: WordSampler, count: number): Chunk[] {
  const heading = [sampler.heading()];
  return Array.from({ length: count }, (_, ordinal) => {
    let content = '';
    while (content.length < 1_500) content += (content ? '\n\n' : '') + sampler.paragraph();
    return { ordinal, content, tokenCount: Math.ceil(content.length / 4), page: null, headingPath: heading, startOffset: 0,
      endOffset: content.length };
  });
}

/** Keyword (2-3 content words), question (a template around them) and common-word queries. */
function makeQueries(count: number, seed: number): { kind: string; text: string }[] {
  const random = seededRandom(seed);
  const content = vocabulary(20_000).slice(FUNCTION_WORDS.length);
  // Frequent words the stopword list keeps ('time', 'first', 'man' ...): each is in many chunks.
  const common = [...FUNCTION_WORDS.slice(40), ...content.slice(0, 40)];
  const pick = (words: string[], skew: number) => words[Math.floor(words.length * random() ** skew)] ?? 'kater';
  const templates = ['What did the {} do with the {}?', 'Where is the {} of {}?', 'Tell me about the {} and the {}.',
    'Who has the {} now that {} is gone?'];
  return Array.from({ length: count }, (_, i) => {
    const kind = (['keyword', 'question', 'common'] as const)[i % 3] ?? 'keyword';
    if (kind === 'keyword') return { kind, text: Array.from({ length: 2 + Math.floor(random() * 2) }, () => pick(content, 3)).join(' ') };
    if (kind === 'question') return { kind, text: (templates[i % templates.length] ?? '').replace(/\{\}/g, () => pick(content, 3)) };
    return { kind, text: (templates[i % templates.length] ?? '').replace(/\{\}/g, () => pick(common, 1)) };
  });
}

export async function measureRetrieval(o: RetrievalOptions) {
  const store = await freshStore(o.backend, o.databaseUrl);
  const database = await openDatabase({ databaseUrl: store.url, dataDir: store.dir ?? '', poolSize: 4 });
  try {
    const db = database.db;
    // As the server opens it: character indexes are built CONCURRENTLY where there is a server.
    const index = await openDocumentIndex({ db, ownConnection: database.ownConnection, logger: pino({ level: 'warn' }), dimensions: o.dimensions,
      embeddings: true });
    const projectId = newId('project');
    await db.insert(projects).values({ id: projectId, name: 'bench' });
    const owners = Array.from({ length: o.others + 1 }, () => ({ projectId, characterId: newId('character') }));
    await db.insert(characters).values(owners.map((owner, i) => ({ id: owner.characterId, projectId, name: `character ${i}` })));
    const sampler = new WordSampler(vocabulary(20_000), 11);
    const vectors = new VectorSource(o.dimensions, 12);
    const fill = { chunks: 0, writeMs: 0, chunksPerSec: 0, upkeepWaitMs: 0 };
    /** The processor's upkeep after each ready document (character vector indexes), running beside the writes. */
    const upkeep: Promise<void>[] = [];
    /** Documents of up to 1,000 chunks until each owner holds `target`, by `writers` at once (as the processor's concurrency). */
    const fillTo = async (targets: { owner: { projectId: string; characterId: string }; target: number }[]) => {
      const jobs = targets.flatMap(({ owner, target }) => Array.from({ length: Math.ceil(target / DOCUMENT_CHUNKS) },
        (_, i) => ({ owner, count: Math.min(DOCUMENT_CHUNKS, target - i * DOCUMENT_CHUNKS) })));
      const started = performance.now();
      const writer = async () => {
        for (let job = jobs.shift(); job; job = jobs.shift()) {
          const chunks = makeChunks(sampler, job.count);
          const embeddings = chunks.map(() => vectors.next());
          const doc = { id: newId('document'), ...job.owner };
          await db.transaction(async (tx) => {
            await tx.insert(documents).values({ ...doc, name: 'part.txt', mimeType: 'text/plain', fileSize: 1, status: 'ready',
              chunkCount: chunks.length });
            await index.replaceChunks(tx, doc, chunks, embeddings);
          });
          fill.chunks += chunks.length;
          upkeep.push(index.afterWrite({ characterId: doc.characterId }));
        }
      };
      await Promise.all(Array.from({ length: o.writers }, writer));
      fill.writeMs += performance.now() - started;
      o.log(`retrieval ${o.backend}: ${fill.chunks} chunks written, ${(fill.chunks / (fill.writeMs / 1000)).toFixed(0)} chunks/s`);
    };
    const [target, ...others] = owners;
    if (!target) throw new Error('no character');
    await fillTo(others.map((owner) => ({ owner, target: Math.ceil(o.othersChunks / o.others) })));
    const queries = makeQueries(o.queries + WARMUP, 21);
    const queryVectors = queries.map(() => vectors.next());
    const tiers: TierResult[] = [];
    for (const tier of o.tiers) {
      await fillTo([{ owner: target, target: tier - (tiers.at(-1)?.chunks ?? 0) }]);
      // Measured once the builds the writes started are done, as a server is a little later.
      const waitStarted = performance.now();
      await Promise.all(upkeep.splice(0));
      fill.upkeepWaitMs += performance.now() - waitStarted;
      // What autovacuum does shortly after a bulk load; the planner needs it to pick the indexes.
      await db.execute(sql`vacuum analyze document_chunks`);
      await db.execute(sql`vacuum analyze document_terms`);
      await db.execute(sql`analyze documents`);
      // The fill's WAL written out now, not by a checkpoint in the middle of the queries.
      await db.execute(sql`checkpoint`);
      const samples: Record<string, Record<string, { ms: number[]; min: number }>> = {};
      const started = performance.now();
      const slotMs = 1000 / o.ratePerSec;
      for (let slot = 0; slot < queries.length * 2; slot++) {
        const i = slot >> 1;
        const mode = slot % 2 === 0 ? 'fulltext' : 'hybrid';
        const query = queries[i];
        if (!query || (mode === 'hybrid' && !index.vectors)) continue;
        const at = started + slot * slotMs;
        const wait = at - performance.now();
        if (wait > 0) await sleep(wait);
        const found = await index.search({ ...target, text: query.text, embedding: mode === 'hybrid' ? (queryVectors[i] ?? null) : null,
          limit: LIMIT });
        const ms = performance.now() - at;
        if (i < WARMUP) continue;
        for (const kind of ['all', query.kind]) {
          const entry = ((samples[mode] ??= {})[kind] ??= { ms: [], min: LIMIT });
          entry.ms.push(ms);
          entry.min = Math.min(entry.min, found.length);
        }
      }
      const latency: Record<string, Record<string, Latency>> = {};
      for (const [mode, kinds] of Object.entries(samples)) {
        for (const [kind, { ms, min }] of Object.entries(kinds)) {
          const sorted = sortedCopy(ms);
          const max = sorted.at(-1) ?? Number.NaN;
          (latency[mode] ??= {})[kind] = { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max, minResults: min };
        }
      }
      const vectorRecall = index.vectors ? await recall(db, target, queryVectors.slice(0, RECALL_QUERIES)) : null;
      tiers.push({ chunks: tier, total: fill.chunks, latency, vectorRecall });
      const all = latency.fulltext?.all;
      const hybrid = latency.hybrid?.all;
      o.log(`retrieval ${o.backend} ${tier}: fulltext p50 ${all?.p50.toFixed(2)} p99 ${all?.p99.toFixed(2)}; ` +
        `hybrid p50 ${hybrid?.p50.toFixed(2)} p99 ${hybrid?.p99.toFixed(2)} ms; recall@6 ${vectorRecall}`);
    }
    fill.chunksPerSec = fill.chunks / (fill.writeMs / 1000);
    return { backend: o.backend, vectors: index.vectors as boolean, fill, tiers };
  } finally {
    await database.close();
    await store.dispose();
  }
}

/** Mean share of the exact cosine top 6 that the approximate (IVFFlat) search returns. */
async function recall(db: Db, scope: { projectId: string; characterId: string }, queryVectors: number[][]): Promise<number> {
  let sum = 0;
  for (const vector of queryVectors) {
    const exact = new Set((await vectorHits(db, scope, vector, LIMIT, { exactUpTo: Infinity })).map((hit) => hit.id));
    const approximate = (await vectorHits(db, scope, vector, LIMIT, { exactUpTo: 0 })).map((hit) => hit.id);
    sum += approximate.filter((id) => exact.has(id)).length / LIMIT;
  }
  return sum / queryVectors.length;
}
