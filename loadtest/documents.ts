/**
 * Documents benchmark (issue 13): `npm run bench:documents`.
 *
 *   (b) ingest     a ~50 MB file uploaded (curl, multipart) and processed to `ready`, on a fresh
 *                  PostgreSQL database and on PGlite (TROUPE_DATA_DIR in a temp dir), in two modes:
 *                  `process`: Troupe as a child with support/probe.ts preloaded, event-loop
 *                  delay measured inside that process by the preloaded probe (monitorEventLoopDelay),
 *                  plus back-to-back GET /healthz from here as the outside view; `in-process`:
 *                  startServer() in this process with monitorEventLoopDelay here. Goal: p99 < 20 ms.
 *   (c) retrieval  DocumentIndex.search, top 6, for one character at each of BENCH_TIERS chunks in an
 *                  index shared with 29 characters (200k chunks), at 20 queries/s, full text and
 *                  hybrid; the fill rate of replaceChunks with both indexes; vector recall@6.
 *                  Goals: p99 <= 5 ms on PostgreSQL, <= 20 ms on PGlite; >= 3,000 chunks/s.
 *
 * Prints markdown tables and writes loadtest/results/documents-<stamp>.{json,md}.
 *
 * Environment (defaults in brackets):
 *   BENCH_PARTS              ingest,retrieval
 *   BENCH_RUNS               repeats of (b) [1]
 *   BENCH_BACKENDS           postgres,pglite (for b and c)
 *   BENCH_MODES              process,in-process (for b)
 *   BENCH_INGEST_FILES       text,pdf,docx (for b: ~50 MB each; pdf and docx are text plus one noise
 *                            image per page/section, which is what makes real ones that large)
 *   BENCH_INGEST_MB          [49.9; the upload limit is 50 MiB]
 *   BENCH_LOOP_RESOLUTION_MS monitorEventLoopDelay resolution [2]
 *   BENCH_INGEST_TIMEOUT_SEC per ingestion [600]
 *   BENCH_DATABASE_URL       PostgreSQL server where temporary databases are made and dropped
 *                            [postgres://postgres@127.0.0.1:5432/test]
 *   BENCH_TIERS              chunks of the measured character [10000,30000,100000]
 *   BENCH_OTHERS_CHUNKS      chunks of the 29 other characters in all [200000]
 *   BENCH_PGLITE_TIERS, BENCH_PGLITE_OTHERS_CHUNKS   the same on PGlite [the PostgreSQL values]
 *   BENCH_DIMENSIONS         [256]   BENCH_QUERIES per tier and mode [300]   BENCH_RATE queries/s [20]
 *   BENCH_WRITERS            documents written at once while filling [2]
 *   BENCH_MAX_RUN_SEC        hard limit for the whole run [3600]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitState, machine, startRun } from './support/children.ts';
import { envList, envNumber, envText } from './support/env.ts';
import { fixed, markdownTable, writeResults } from './support/report.ts';
import { ROOT } from './support/troupe.ts';
import { measureIngest, stageFile, type Backend, type IngestFile, type IngestResult, type Mode } from './document-support/ingest.ts';
import { measureRetrieval, type RetrievalResult } from './document-support/retrieval.ts';
import { makeBulkDocx, makeBulkPdf, makeTextFile } from './document-support/text.ts';

const PARTS = ['ingest', 'retrieval'] as const;
const BACKENDS = ['postgres', 'pglite'] as const;
const MODES = ['process', 'in-process'] as const;
const INGEST_FILES = ['text', 'pdf', 'docx'] as const;
const MB = 1_048_576;

const log = (line: string) => process.stderr.write(`[bench:documents] ${line}\n`);

async function ingestFiles(dir: string, wanted: readonly (typeof INGEST_FILES)[number][]): Promise<IngestFile[]> {
  const bytes = Math.floor(envNumber('BENCH_INGEST_MB', 49.9, 1, false) * MB);
  const files: IngestFile[] = [];
  for (const kind of wanted) {
    const t0 = performance.now();
    if (kind === 'text') files.push(await stageFile(dir, 'text', 'big.txt', 'text/plain', makeTextFile(bytes)));
    if (kind === 'pdf') files.push(await stageFile(dir, 'pdf', 'big.pdf', 'application/pdf', await makeBulkPdf(bytes - 2 * MB, 300)));
    if (kind === 'docx') files.push(await stageFile(dir, 'docx', 'big.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', await makeBulkDocx(bytes - 2 * MB, 100)));
    const file = files[files.length - 1];
    log(`generated ${kind}: ${((file?.bytes ?? 0) / MB).toFixed(1)} MiB in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  return files;
}

async function main(): Promise<void> {
  const { stamp, disarm } = startRun('bench:documents', envNumber('BENCH_MAX_RUN_SEC', 3600, 60) * 1000);
  const parts = envList('BENCH_PARTS', PARTS);
  const runs = envNumber('BENCH_RUNS', 1, 1);
  const backends: Backend[] = envList('BENCH_BACKENDS', BACKENDS);
  const modes: Mode[] = envList('BENCH_MODES', MODES);
  const databaseUrl = envText('BENCH_DATABASE_URL') ?? 'postgres://postgres@127.0.0.1:5432/test';
  const git = await gitState(ROOT);
  const out: Record<string, unknown> = { stamp, machine: machine(), git, parts, runs };
  const sections: string[] = [];

  if (parts.includes('ingest')) {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-doc-bench-files-'));
    try {
      const files = await ingestFiles(dir, envList('BENCH_INGEST_FILES', INGEST_FILES));
      const results: IngestResult[] = [];
      for (let run = 1; run <= runs; run++) {
        for (const file of files) {
          for (const backend of backends) {
            for (const mode of modes) {
              results.push(await measureIngest({
                backend, mode, file, run, databaseUrl,
                resolutionMs: envNumber('BENCH_LOOP_RESOLUTION_MS', 2, 1),
                timeoutMs: envNumber('BENCH_INGEST_TIMEOUT_SEC', 600, 10) * 1000,
                log,
              }));
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
        othersChunks: envNumber(pglite && envText('BENCH_PGLITE_OTHERS_CHUNKS') ? 'BENCH_PGLITE_OTHERS_CHUNKS' : 'BENCH_OTHERS_CHUNKS', 200_000, 0),
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

  const markdown = `${sections.join('\n\n')}\n\nTroupe at ${git.head}${git.dirtySrc.length ? ` with uncommitted changes in ${git.dirtySrc.length} src/ file(s)` : ''}.`;
  const paths = await writeResults('documents', stamp, out, markdown);
  process.stdout.write(`\n${markdown}\n\nRaw results: ${paths.json}\n`);
  disarm();
}

/** Rows with the same key, in first-seen order; `runs` joins a column over them as `a / b`. */
const grouped = <T>(items: T[], key: (item: T) => string): T[][] => [...Map.groupBy(items, key).values()];
const runs = <T>(group: T[], cell: (item: T) => string) => group.map(cell).join(' / ');
const f = (v: number | null | undefined, digits = 1) => fixed(v, digits, 'n/a');

function formatIngest(results: IngestResult[], files: IngestFile[]): string {
  const size = (id: string) => `${((files.find((x) => x.id === id)?.bytes ?? 0) / 1_048_576).toFixed(1)} MiB`;
  const rows = grouped(results, (r) => `${r.file}|${r.backend}|${r.mode}`).map((g) => {
    const first = g[0]!;
    return [
      `${first.file} ${size(first.file)}`,
      first.backend,
      first.mode,
      runs(g, (r) => (r.status === 'ready' ? String(r.chunkCount) : r.status)),
      runs(g, (r) => `${f(r.uploadMs / 1000)} + ${f(r.processMs / 1000)}`),
      runs(g, (r) => f(r.idle.p99)),
      runs(g, (r) => f(r.loop.p50)),
      runs(g, (r) => f(r.loop.p99)),
      runs(g, (r) => f(r.loop.max, 0)),
      runs(g, (r) => `${r.loop.stallCount} (${f(r.loop.stalledMs / 1000)} s)`),
      runs(g, (r) => (r.healthz ? `${f(r.healthz.p50)}, ${f(r.healthz.p99)}, ${f(r.healthz.max, 0)}` : '-')),
      runs(g, (r) => r.loop.stalls.slice(0, 3).map(([, ms]) => ms).join(',') || '-'),
    ];
  });
  return `### (b) Ingestion end to end: main-thread event-loop delay (goal p99 < 20 ms)\n\n${markdownTable(
    ['file', 'backend', 'mode', 'chunks', 'upload + processing s', 'idle loop p99 ms', 'loop p50 ms', 'loop p99 ms', 'loop max ms', 'stalls > 20 ms: count (time)', 'GET /healthz p50, p99, max ms', 'longest stalls ms'],
    rows,
  )}`;
}

function formatRetrieval(results: RetrievalResult[]): string {
  const rows: string[][] = [];
  for (const r of results) {
    for (const tier of r.tiers) {
      for (const [mode, kinds] of Object.entries(tier.latency)) {
        const cell = (kind: string) => {
          const l = kinds[kind];
          return l ? `${f(l.p50, 2)} / ${f(l.p99, 2)}` : '-';
        };
        const all = kinds.all;
        rows.push([r.backend, String(tier.chunks), String(tier.total), mode, cell('all'), f(all?.max, 1), cell('keyword'), cell('question'), cell('common'), String(all?.minResults ?? '-'), mode === 'hybrid' ? f(tier.vectorRecall, 3) : '']);
      }
    }
  }
  const fills = results.map((r) => `${r.backend}: ${r.fill.chunks} chunks written in ${f(r.fill.writeMs / 1000, 0)} s (${f(r.fill.chunksPerSec, 0)} chunks/s, vectors ${r.vectors})`).join('; ');
  return `### (c) Retrieval: DocumentIndex.search, top 6, one character in a shared index, 20 queries/s (goal p99 <= 5 ms PostgreSQL, <= 20 ms PGlite)\n\n${markdownTable(
    ['backend', 'chunks (character)', 'chunks (index)', 'mode', 'p50 / p99 ms', 'max ms', 'keyword p50 / p99', 'question p50 / p99', 'common-word p50 / p99', 'fewest results', 'vector recall@6'],
    rows,
  )}\n\nFill (replaceChunks: chunk rows, document_terms chunk sets, HNSW): ${fills}.`;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
