/**
 * Part (c) of the documents benchmark: DocumentIndex.search latency with many chunks for one
 * character. A Troupe server runs in this process (startServer, so migrations, pgvector setup
 * and the HNSW index for EMBEDDINGS_DIMENSIONS are exactly the server's); one character gets
 * documents of `perDocument` chunks each, written as the processor writes them (insertDocument,
 * replaceChunks in a transaction, status `ready`), with random unit vectors as embeddings, until
 * `target` chunks or the fill time budget, whichever comes first. Then queries run one at a time:
 * full text only (embedding null) and hybrid (text + vector, fused by RRF).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { sql } from 'drizzle-orm';
import { loadConfig } from '../../src/config.ts';
import type { Chunk } from '../../src/documents/chunker.ts';
import { insertDocument, setStatus } from '../../src/documents/repository.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { openDocumentIndex } from '../../src/retrieval/document-index.ts';
import { rowsOf } from '../../src/retrieval/pgvector-setup.ts';
import { startServer } from '../../src/server.ts';
import { createTempDatabase } from '../../test/support/databases.ts';
import { summarize, type Summary } from '../support/stats.ts';
import type { Backend } from './ingest.ts';
import { makeQueries, seededRandom, vocabulary, WordSampler } from './text.ts';

export interface RetrievalOptions {
  backend: Backend;
  databaseUrl: string;
  target: number;
  perDocument: number;
  fillBudgetMs: number;
  dimensions: number;
  queries: number;
  warmup: number;
  /** Measured passes over the queries (the same database). */
  passes: number;
  limit: number;
  log: (line: string) => void;
}

export interface RetrievalResult {
  backend: Backend;
  chunks: number;
  vectors: boolean;
  fillMs: number;
  chunksPerSec: number;
  /** kind -> one summary per pass. */
  latency: Record<string, Summary[]>;
  /** Mean results returned per query, per kind (a sanity check that queries hit). */
  hits: Record<string, number>;
}

/** A random unit vector, its components rounded to 4 decimals (shorter SQL literals). */
function unitVector(random: () => number, dims: number): number[] {
  const v = Array.from({ length: dims }, () => random() * 2 - 1);
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => Math.round((x / norm) * 1e4) / 1e4);
}

function makeChunks(sampler: WordSampler, count: number): Chunk[] {
  const chunks: Chunk[] = [];
  let offset = 0;
  const heading = [sampler.heading()];
  for (let i = 0; i < count; i++) {
    let content = '';
    while (content.length < 1_500) content += (content ? '\n\n' : '') + sampler.paragraph();
    chunks.push({ ordinal: i, content, tokenCount: Math.ceil(content.length / 4), page: null, headingPath: heading, startOffset: offset, endOffset: offset + content.length });
    offset += content.length - 240;
  }
  return chunks;
}

export async function measureRetrieval(o: RetrievalOptions): Promise<RetrievalResult> {
  const store = o.backend === 'postgres' ? await createTempDatabase(o.databaseUrl) : null;
  const dir = o.backend === 'pglite' ? await mkdtemp(join(tmpdir(), 'troupe-doc-bench-')) : null;
  const key = `sk-troupe-docbench${randomBytes(12).toString('base64url')}`;
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    HTTP_ENGINE: 'node',
    TROUPE_BOOTSTRAP_KEY: key,
    LOG_LEVEL: 'warn',
    ...(store ? { DATABASE_URL: store.url } : { TROUPE_DATA_DIR: dir ?? '' }),
    // Never called: chunks get their vectors here, and queries pass theirs in.
    EMBEDDINGS_BASE_URL: 'http://127.0.0.1:9/v1',
    EMBEDDINGS_MODEL: 'bench-embeddings',
    EMBEDDINGS_DIMENSIONS: String(o.dimensions),
  });
  const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
  const logger = createLogger(config.logLevel, sink);
  const server = await startServer(config, logger);
  try {
    const res = await fetch(`${server.url}/characters`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Librarian' }),
    });
    if (res.status !== 201) throw new Error(`POST /characters: ${res.status} ${await res.text()}`);
    const characterId = ((await res.json()) as { id: string }).id;
    const db = server.resources.database.db;
    const [owner] = rowsOf<{ project_id: string }>(await db.execute(sql`select project_id from characters where id = ${characterId}`));
    if (!owner) throw new Error('the character has no project');
    const projectId = owner.project_id;
    const index = await openDocumentIndex({ db, logger, dimensions: o.dimensions, embeddings: true });

    const sampler = new WordSampler(vocabulary(20_000), 11);
    const random = seededRandom(12);
    const started = performance.now();
    let filled = 0;
    let lastLog = started;
    while (filled < o.target && performance.now() - started < o.fillBudgetMs) {
      const count = Math.min(o.perDocument, o.target - filled);
      const chunks = makeChunks(sampler, count);
      const embeddings = chunks.map(() => unitVector(random, o.dimensions));
      const doc = await insertDocument(db, { projectId, characterId, name: `part-${filled}.txt`, mimeType: 'text/plain', content: new TextEncoder().encode('bench') });
      await db.transaction((tx) => index.replaceChunks(tx, { id: doc.id, projectId, characterId }, chunks, embeddings));
      await setStatus(db, doc.id, { status: 'ready', chunkCount: count });
      filled += count;
      if (performance.now() - lastLog > 15_000) {
        lastLog = performance.now();
        o.log(`retrieval ${o.backend}: ${filled} chunks in ${((lastLog - started) / 1000).toFixed(0)} s`);
      }
    }
    const fillMs = performance.now() - started;
    // What autovacuum does shortly after a bulk load; the planner needs it to pick the indexes.
    await db.execute(sql`analyze documents`);
    await db.execute(sql`analyze document_chunks`);
    o.log(`retrieval ${o.backend}: ${filled} chunks filled in ${(fillMs / 1000).toFixed(0)} s (vectors: ${index.vectors}); querying`);

    const queries = makeQueries(o.queries + o.warmup, 21);
    const queryRandom = seededRandom(22);
    const vectors = queries.map(() => unitVector(queryRandom, o.dimensions));
    const kinds: { id: string; text: (i: number) => string; vector: boolean }[] = [
      { id: 'fulltext question', text: (i) => queries[i]?.question ?? '', vector: false },
      { id: 'fulltext keywords', text: (i) => queries[i]?.keywords ?? '', vector: false },
      { id: 'hybrid question', text: (i) => queries[i]?.question ?? '', vector: true },
      { id: 'hybrid keywords', text: (i) => queries[i]?.keywords ?? '', vector: true },
    ];
    const latency: Record<string, Summary[]> = {};
    const hits: Record<string, number> = {};
    for (let pass = 0; pass < o.passes; pass++) {
      for (const kind of kinds) {
        if (kind.vector && !index.vectors) continue;
        const times: number[] = [];
        let found = 0;
        for (let i = 0; i < queries.length; i++) {
          const t0 = performance.now();
          const results = await index.search({ projectId, characterId, text: kind.text(i), embedding: kind.vector ? (vectors[i] ?? null) : null, limit: o.limit });
          const ms = performance.now() - t0;
          if (i >= o.warmup) {
            times.push(ms);
            found += results.length;
          }
        }
        (latency[kind.id] ??= []).push(summarize(times));
        hits[kind.id] = found / times.length;
        const s = summarize(times);
        o.log(`retrieval ${o.backend} ${kind.id} pass ${pass + 1}: p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms`);
      }
    }
    return { backend: o.backend, chunks: filled, vectors: index.vectors, fillMs, chunksPerSec: filled / (fillMs / 1000), latency, hits };
  } finally {
    await server.stop();
    await store?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}
