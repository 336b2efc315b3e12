/**
 * Documents benchmark (issue 13): `npm run bench:documents`.
 *   (b) ingest     a ~50 MB file uploaded (curl, multipart) and processed to `ready`, on a fresh
 *                  PostgreSQL database and on PGlite, in two modes: `process`, Troupe as a child
 *                  with the event-loop delay measured inside it (probe.ts) and back-to-back GET
 *                  /healthz from here; `in-process`, startServer() here. Goal: p99 < 20 ms.
 *   (c) retrieval  DocumentIndex.search, top 6, for one character at each of BENCH_TIERS chunks in an
 *                  index shared with 29 characters (200k chunks), at 20 queries/s, full text and
 *                  hybrid; the fill rate of replaceChunks with both indexes; vector recall@6.
 *                  Goals: p99 <= 5 ms on PostgreSQL, <= 20 ms on PGlite; >= 3,000 chunks/s.
 * Prints markdown tables and writes loadtest/results/documents-<stamp>.{json,md}.
 * Environment (defaults in brackets):
 *   BENCH_PARTS [ingest,retrieval]  BENCH_RUNS repeats of (b) [1]  BENCH_BACKENDS [postgres,pglite] (b and c)
 *   BENCH_MODES [process,in-process] (b)  BENCH_INGEST_FILES [text,pdf,docx] (b: ~50 MB each; pdf and docx
 *     are text plus one noise image per page/section, which is what makes real ones that large)
 *   BENCH_INGEST_MB [49.9; the upload limit is 50 MiB]  BENCH_LOOP_RESOLUTION_MS [2]  BENCH_INGEST_TIMEOUT_SEC [600]
 *   BENCH_DATABASE_URL [postgres://postgres@127.0.0.1:5432/test] (temporary databases are made and dropped there)
 *   BENCH_TIERS chunks of the measured character [10000,30000,100000]
 *   BENCH_OTHERS_CHUNKS chunks of the 29 other characters in all [200000]
 *   BENCH_PGLITE_TIERS, BENCH_PGLITE_OTHERS_CHUNKS   the same on PGlite [the PostgreSQL values]
 *   BENCH_DIMENSIONS [256]  BENCH_QUERIES per tier and mode [300]  BENCH_RATE queries/s [20]
 *   BENCH_WRITERS documents written at once while filling [2]  BENCH_MAX_RUN_SEC [3600]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitState, machine, runBench, type Log } from './support/children.ts';
import { envDatabaseUrl, envList, envNumber, envText } from './support/env.ts';
import { fixed, markdownTable, writeResults } from './support/report.ts';
import { measureIngest, stageFile, type IngestFile, type IngestResult } from './document-support/ingest.ts';
import { measureRetrieval, type RetrievalResult } from './document-support/retrieval.ts';
import { makeBulkDocx, makeBulkPdf, makeTextFile } from './document-support/text.ts';

const INGEST_FILES = ['text', 'pdf', 'docx'] as const;
const MB = 1_048_576;
const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

async function ingestFiles(dir: string, wanted: readonly (typeof INGEST_FILES)[number][], log: Log): Promise<IngestFile[]> {
  const bytes = Math.floor(envNumber('BENCH_INGEST_MB', 49.9, 1, false) * MB);
  const files: IngestFile[] = [];
  for (const kind of wanted) {
    const t0 = performance.now();
    if (kind === 'text') files.push(await stageFile(dir, 'text', 'big.txt', 'text/plain', makeTextFile(bytes)));
    if (kind === 'pdf') files.push(await stageFile(dir, 'pdf', 'big.pdf', 'application/pdf', await makeBulkPdf(bytes - 2 * MB, 300)));
    if (kind === 'docx') files.push(await stageFile(dir, 'docx', 'big.docx', DOCX, await makeBulkDocx(bytes - 2 * MB, 100)));
    log(`generated ${kind}: ${((files.at(-1)?.bytes ?? 0) / MB).toFixed(1)} MiB in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  return files;
}

runBench('bench:documents', envNumber('BENCH_MAX_RUN_SEC', 3600, 60) * 1000, async ({ stamp, log }) => {
  const parts = envList('BENCH_PARTS', ['ingest', 'retrieval'] as const);
  const runs = envNumber('BENCH_RUNS', 1, 1);
  const backends = envList('BENCH_BACKENDS', ['postgres', 'pglite'] as const);
  const modes = envList('BENCH_MODES', ['process', 'in-process'] as const);
  const databaseUrl = envDatabaseUrl();
  const git = await gitState();
  const out: Record<string, unknown> = { stamp, machine: machine(), git, parts, runs };
  const sections: string[] = [];
  if (parts.includes('ingest')) {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-doc-bench-files-'));
    try {
      const files = await ingestFiles(dir, envList('BENCH_INGEST_FILES', INGEST_FILES), log);
      const resolutionMs = envNumber('BENCH_LOOP_RESOLUTION_MS', 2, 1);
      const timeoutMs = envNumber('BENCH_INGEST_TIMEOUT_SEC', 600, 10) * 1000;
      const results: IngestResult[] = [];
      for (let run = 1; run <= runs; run++) {
        for (const file of files) {
          for (const backend of backends) {
            for (const mode of modes) {
              results.push(await measureIngest({ backend, mode, file, run, databaseUrl, resolutionMs, timeoutMs, log }));
            }
          }
        }
      }
      out.ingest = results;
      sections.push(formatIngest(results, files));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  if (parts.includes('retrieval')) {
    const results: RetrievalResult[] = [];
    const tiers = envText('BENCH_TIERS') ?? '10000,30000,100000';
    for (const backend of backends) {
      const pglite = backend === 'pglite';
      results.push(await measureRetrieval({
        backend,
        databaseUrl,
        tiers: ((pglite && envText('BENCH_PGLITE_TIERS')) || tiers).split(',').map(Number),
        others: 29,
        othersChunks: envNumber(pglite && envText('BENCH_PGLITE_OTHERS_CHUNKS') ? 'BENCH_PGLITE_OTHERS_CHUNKS' : 'BENCH_OTHERS_CHUNKS',
          200_000, 0),
        dimensions: envNumber('BENCH_DIMENSIONS', 256, 1),
        queries: envNumber('BENCH_QUERIES', 300, 10),
        ratePerSec: envNumber('BENCH_RATE', 20, 1, false),
        writers: envNumber('BENCH_WRITERS', 2, 1),
        log,
      }));
    }
    out.retrieval = results;
    sections.push(formatRetrieval(results));
  }
  const changes = git.dirtySrc.length ? ` with uncommitted changes in ${git.dirtySrc.length} src/ file(s)` : '';
  const markdown = `${sections.join('\n\n')}\n\nTroupe at ${git.head}${changes}.`;
  const paths = await writeResults('documents', stamp, out, markdown);
  process.stdout.write(`\n${markdown}\n\nRaw results: ${paths.json}\n`);
});

const f = (v: number | null | undefined, digits = 1) => fixed(v, digits, 'n/a');

function formatIngest(results: IngestResult[], files: IngestFile[]): string {
  const size = (id: string) => `${((files.find((x) => x.id === id)?.bytes ?? 0) / MB).toFixed(1)} MiB`;
  // Rows with the same file, backend and mode, in first-seen order; each cell joins its runs as `a / b`.
  const rows = [...Map.groupBy(results, (r) => `${r.file}|${r.backend}|${r.mode}`).values()].map((g) => {
    const runs = (cell: (item: IngestResult) => string) => g.map(cell).join(' / ');
    const { file, backend, mode } = g[0]!;
    return [
      `${file} ${size(file)}`, backend, mode,
      runs((r) => (r.status === 'ready' ? String(r.chunkCount) : r.status)),
      runs((r) => `${f(r.uploadMs / 1000)} + ${f(r.processMs / 1000)}`),
      runs((r) => f(r.idle.p99)),
      runs((r) => f(r.loop.p50)),
      runs((r) => f(r.loop.p99)),
      runs((r) => f(r.loop.max, 0)),
      runs((r) => `${r.loop.stallCount} (${f(r.loop.stalledMs / 1000)} s)`),
      runs((r) => (r.healthz ? `${f(r.healthz.p50)}, ${f(r.healthz.p99)}, ${f(r.healthz.max, 0)}` : '-')),
      runs((r) => r.loop.stalls.slice(0, 3).map(([, ms]) => ms).join(',') || '-'),
    ];
  });
  const header = ['file', 'backend', 'mode', 'chunks', 'upload + processing s', 'idle loop p99 ms', 'loop p50 ms', 'loop p99 ms',
    'loop max ms',    'stalls > 20 ms: count (time)', 'GET /healthz p50, p99, max ms', 'longest stalls ms'];
  return `### (b) Ingestion end to end: main-thread event-loop delay (goal p99 < 20 ms)\n\n${markdownTable(header, rows)}`;
}

function formatRetrieval(results: RetrievalResult[]): string {
  const rows: string[][] = [];
  for (const r of results) {
    for (const tier of r.tiers) {
      for (const [mode, kinds] of Object.entries(tier.latency)) {
        const cell = (kind: string) => (kinds[kind] ? `${f(kinds[kind].p50, 2)} / ${f(kinds[kind].p99, 2)}` : '-');
        const all = kinds.all;
        const recall = mode === 'hybrid' ? f(tier.vectorRecall, 3) : '';
        rows.push([r.backend, String(tier.chunks), String(tier.total), mode, cell('all'), f(all?.max, 1), cell('keyword'), cell('question'),
          cell('common'),          String(all?.minResults ?? '-'), recall]);
      }
    }
  }
  const fills = results.map((r) => `${r.backend}: ${r.fill.chunks} chunks written in ${f(r.fill.writeMs / 1000, 0)} s ` +
    `(${f(r.fill.chunksPerSec, 0)} chunks/s, vectors ${r.vectors}; then ${f(r.fill.upkeepWaitMs / 1000, 1)} s waiting for index builds)`).join('; ');
  const header = ['backend', 'chunks (character)', 'chunks (index)', 'mode', 'p50 / p99 ms', 'max ms', 'keyword p50 / p99',
    'question p50 / p99',    'common-word p50 / p99', 'fewest results', 'vector recall@6'];
  const title = '### (c) Retrieval: DocumentIndex.search, top 6, one character in a shared index, 20 queries/s ' +
    '(goal p99 <= 5 ms PostgreSQL, <= 20 ms PGlite)';
  return `${title}\n\n${markdownTable(header, rows)}\n\nFill (replaceChunks: chunk rows, document_terms chunk sets, the IVFFlat vector index and its retraining): ${fills}.`;
}
