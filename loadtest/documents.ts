/**
 * Documents benchmark (issue 5): `npm run bench:documents`.
 *
 *   (a) extract    extraction throughput through the real ParserPool (workers/parser-pool.ts) with
 *                  the server's limits: a generated text-only PDF (pages/s), and plain text,
 *                  Markdown and HTML (MB/s). Per run a fresh pool: the first parse is "cold"
 *                  (starts the worker and loads the parser), the next BENCH_WARM_RUNS are "warm".
 *                  Also times chunkSections on the result (main thread in the server).
 *   (b) ingest     a ~50 MB file uploaded (curl, multipart) and processed to `ready`, on a fresh
 *                  PostgreSQL database and on PGlite (TROUPE_DATA_DIR in a temp dir), in two modes:
 *                  `process`: `node --import document-support/loop-probe.ts src/main.ts`, event-loop
 *                  delay measured inside that process by the preloaded probe (monitorEventLoopDelay),
 *                  plus back-to-back GET /healthz from here as the outside view; `in-process`:
 *                  startServer() in this process with monitorEventLoopDelay here. Goal: p99 < 20 ms.
 *   (c) retrieval  DocumentIndex.search p50/p99 with BENCH_CHUNKS chunks (random unit vectors of
 *                  BENCH_DIMENSIONS, HNSW index made by the server) for one character, full text
 *                  only and hybrid, on PostgreSQL and PGlite. Goal: p99 <= 5 ms.
 *
 * Prints markdown tables and writes loadtest/results/documents-<timestamp>.json.
 *
 * Environment (defaults in brackets):
 *   BENCH_PARTS              extract,ingest,retrieval
 *   BENCH_RUNS               repeats of (a) and (b) [2]
 *   BENCH_WARM_RUNS          warm parses per run of (a) [3]
 *   BENCH_PDF_PAGES          pages of the (a) PDF [200]
 *   BENCH_TEXT_MB            size of the (a) text, Markdown and HTML files, MB [19.5: just under the
 *                            server's 20M-character text cap, so no text is dropped]
 *   BENCH_BACKENDS           postgres,pglite (for b and c)
 *   BENCH_MODES              process,in-process (for b)
 *   BENCH_INGEST_FILES       text,pdf,docx (for b: ~50 MB each; pdf and docx are text plus one noise
 *                            image per page/section, which is what makes real ones that large)
 *   BENCH_INGEST_MB          [49.9; the upload limit is 50 MiB]
 *   BENCH_LOOP_RESOLUTION_MS monitorEventLoopDelay resolution [2]
 *   BENCH_INGEST_TIMEOUT_SEC per ingestion [600]
 *   BENCH_DATABASE_URL       PostgreSQL server where temporary databases are made and dropped
 *                            [postgres://postgres@127.0.0.1:5432/test]
 *   BENCH_CHUNKS             chunks for (c) [100000]   BENCH_FILL_SEC fill budget per backend [300]
 *   BENCH_PGLITE_CHUNKS      chunks for (c) on PGlite [BENCH_CHUNKS]
 *   BENCH_DIMENSIONS         [256]   BENCH_QUERIES [200]   BENCH_QUERY_WARMUP [20]   BENCH_PASSES [2]
 *   BENCH_MAX_RUN_SEC        hard limit for the whole run [3600]
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envList, envNumber, envText } from './support/env.ts';
import { gitState, machine, startRun } from './support/run.ts';
import { measureExtraction, type ExtractInput, type ExtractResult } from './document-support/extract.ts';
import { makeBulkDocx, makeBulkPdf, makeTextPdf } from './document-support/files.ts';
import { measureIngest, stageFile, type Backend, type IngestFile, type IngestResult, type Mode } from './document-support/ingest.ts';
import { measureRetrieval, type RetrievalResult } from './document-support/retrieval.ts';
import { makeTextFile } from './document-support/text.ts';
import { formatExtract, formatIngest, formatRetrieval } from './document-support/report.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RESULTS_DIR = join(HERE, 'results');
const PARTS = ['extract', 'ingest', 'retrieval'] as const;
const BACKENDS = ['postgres', 'pglite'] as const;
const MODES = ['process', 'in-process'] as const;
const INGEST_FILES = ['text', 'pdf', 'docx'] as const;
const MB = 1_048_576;

const log = (line: string) => process.stderr.write(`[bench:documents] ${line}\n`);

async function extractPart(runs: number, warmRuns: number): Promise<ExtractResult[]> {
  const textBytes = Math.round(envNumber('BENCH_TEXT_MB', 19.5, 0.1, false) * 1_000_000);
  const pages = envNumber('BENCH_PDF_PAGES', 200, 1);
  log(`generating a ${pages}-page PDF and ${(textBytes / 1e6).toFixed(1)} MB text, Markdown and HTML`);
  const inputs: ExtractInput[] = [
    { id: `pdf ${pages} pages`, mimeType: 'application/pdf', bytes: await makeTextPdf(pages), pages },
    { id: 'text', mimeType: 'text/plain', bytes: makeTextFile('text', textBytes), pages: null },
    { id: 'markdown', mimeType: 'text/markdown', bytes: makeTextFile('markdown', textBytes), pages: null },
    { id: 'html', mimeType: 'text/html', bytes: makeTextFile('html', textBytes), pages: null },
  ];
  const results: ExtractResult[] = [];
  for (let run = 1; run <= runs; run++) {
    for (const input of inputs) results.push(await measureExtraction(input, warmRuns, log));
  }
  return results;
}

async function ingestFiles(dir: string, wanted: readonly (typeof INGEST_FILES)[number][]): Promise<IngestFile[]> {
  const bytes = Math.floor(envNumber('BENCH_INGEST_MB', 49.9, 1, false) * MB);
  const files: IngestFile[] = [];
  for (const kind of wanted) {
    const t0 = performance.now();
    if (kind === 'text') files.push(await stageFile(dir, 'text', 'big.txt', 'text/plain', makeTextFile('text', bytes)));
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
  const runs = envNumber('BENCH_RUNS', 2, 1);
  const backends: Backend[] = envList('BENCH_BACKENDS', BACKENDS);
  const modes: Mode[] = envList('BENCH_MODES', MODES);
  const databaseUrl = envText('BENCH_DATABASE_URL') ?? 'postgres://postgres@127.0.0.1:5432/test';
  const git = await gitState(ROOT);
  const out: Record<string, unknown> = { stamp, machine: machine(), git, parts, runs };
  const sections: string[] = [];

  if (parts.includes('extract')) {
    const results = await extractPart(runs, envNumber('BENCH_WARM_RUNS', 3, 1));
    out.extract = results;
    sections.push(formatExtract(results));
  }

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
                backend, mode, file, run, databaseUrl, root: ROOT,
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
    const chunks = envNumber('BENCH_CHUNKS', 100_000, 100);
    for (const backend of backends) {
      results.push(await measureRetrieval({
        backend,
        databaseUrl,
        target: backend === 'pglite' ? envNumber('BENCH_PGLITE_CHUNKS', chunks, 100) : chunks,
        perDocument: 1_000,
        fillBudgetMs: envNumber('BENCH_FILL_SEC', 300, 5) * 1000,
        dimensions: envNumber('BENCH_DIMENSIONS', 256, 1),
        queries: envNumber('BENCH_QUERIES', 200, 10),
        warmup: envNumber('BENCH_QUERY_WARMUP', 20, 0),
        passes: envNumber('BENCH_PASSES', 2, 1),
        limit: 6,
        log,
      }));
    }
    out.retrieval = results;
    sections.push(formatRetrieval(results));
  }

  await mkdir(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `documents-${stamp}.json`);
  await writeFile(file, JSON.stringify(out, null, 2));
  process.stdout.write(`\n${sections.join('\n\n')}\n\nTroupe at ${git.head}${git.dirtySrc.length ? ` with uncommitted changes in ${git.dirtySrc.length} src/ file(s)` : ''}; raw results: ${file}\n`);
  disarm();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
