/** Markdown tables for the documents benchmark; several runs of one row show as `a / b`. */
import type { IngestFile, IngestResult } from './ingest.ts';
import type { RetrievalResult } from './retrieval.ts';

function table(header: string[], rows: string[][]): string {
  const align = header.map((_, i) => (i === 0 ? '---' : '---:'));
  return [header, align, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

const f = (v: number | null | undefined, digits = 1) => (v === null || v === undefined || !Number.isFinite(v) ? 'n/a' : v.toFixed(digits));

/** Rows with the same key, in first-seen order, and the `a / b` join of a column over them. */
function grouped<T>(items: T[], key: (item: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return [...groups.values()];
}
const runs = <T>(group: T[], cell: (item: T) => string) => group.map(cell).join(' / ');

export function formatIngest(results: IngestResult[], files: IngestFile[]): string {
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
  return `### (b) Ingestion end to end: main-thread event-loop delay (goal p99 < 20 ms)\n\n${table(
    ['file', 'backend', 'mode', 'chunks', 'upload + processing s', 'idle loop p99 ms', 'loop p50 ms', 'loop p99 ms', 'loop max ms', 'stalls > 20 ms: count (time)', 'GET /healthz p50, p99, max ms', 'longest stalls ms'],
    rows,
  )}`;
}

export function formatRetrieval(results: RetrievalResult[]): string {
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
  return `### (c) Retrieval: DocumentIndex.search, top 6, one character in a shared index, 20 queries/s (goal p99 <= 5 ms PostgreSQL, <= 20 ms PGlite)\n\n${table(
    ['backend', 'chunks (character)', 'chunks (index)', 'mode', 'p50 / p99 ms', 'max ms', 'keyword p50 / p99', 'question p50 / p99', 'common-word p50 / p99', 'fewest results', 'vector recall@6'],
    rows,
  )}\n\nFill (replaceChunks: chunks, tsvector + GIN, document_terms, HNSW): ${fills}.`;
}
