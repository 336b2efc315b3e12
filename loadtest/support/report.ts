/** The report writer every benchmark shares (JSON plus Markdown under loadtest/results/), tables and summaries. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './children.ts';

export const RESULTS_DIR = join(ROOT, 'loadtest', 'results');
export async function writeResults(name: string, stamp: string, json: unknown, markdown: string) {
  await mkdir(RESULTS_DIR, { recursive: true });
  const paths = { json: join(RESULTS_DIR, `${name}-${stamp}.json`), markdown: join(RESULTS_DIR, `${name}-${stamp}.md`) };
  await Promise.all([writeFile(paths.json, `${JSON.stringify(json, null, 2)}\n`), writeFile(paths.markdown, `${markdown}\n`)]);
  return paths;
}
/** A Markdown table; `align` holds `l` or `r` per column (default: the first left, the others right). */
export function markdownTable(header: readonly string[], rows: readonly (readonly (string | number)[])[], align?: string): string {
  const marks = header.map((_, i) => ((align ?? `l${'r'.repeat(header.length)}`).charAt(i) === 'r' ? '---:' : '---'));
  return [header, marks, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}
export const fixed = (value: number | null | undefined, digits = 2, fallback = '—'): string =>
  value === null || value === undefined || !Number.isFinite(value) ? fallback : value.toFixed(digits);
export const ms = (value: number | null | undefined): string => fixed(value);
export const sortedCopy = (values: readonly number[]): Float64Array => Float64Array.from(values).sort();
/** JSON-safe rounding to microseconds (NaN becomes null). */
export const round3 = (value: number): number | null => (Number.isFinite(value) ? Math.round(value * 1000) / 1000 : null);
/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] ?? Number.NaN;
}
export type Summary = { count: number; mean: number; p50: number; p90: number; p99: number; p999: number; max: number };
export function summarize(values: readonly number[]): Summary {
  const s = sortedCopy(values);
  const mean = s.length === 0 ? Number.NaN : s.reduce((a, b) => a + b, 0) / s.length;
  const at = (p: number) => percentile(s, p);
  return { count: s.length, mean, p50: at(50), p90: at(90), p99: at(99), p999: at(99.9), max: s.at(-1) ?? Number.NaN };
}
export const roundSummary = (s: Summary): Record<keyof Summary, number | null> =>
  Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'count' ? v : round3(v)])) as Record<keyof Summary, number | null>;
/** The middle value, or the mean of the two middle ones (the lower is the nearest-rank p50). */
export function median(values: readonly number[]): number {
  const s = sortedCopy(values);
  return (percentile(s, 50) + (s[Math.floor(s.length / 2)] ?? Number.NaN)) / 2;
}
/** A noise floor: two halves of one run (even and odd samples) differ only by chance, so a smaller added latency is noise. */
export function splitHalfSpread(values: readonly number[], p: number): number {
  const [even, odd] = [0, 1].map((r) => sortedCopy(values.filter((_, i) => i % 2 === r)));
  return even?.length && odd?.length ? Math.abs(percentile(even, p) - percentile(odd, p)) : Number.NaN;
}
/** Outcome counts by key, e.g. `{ "200": 40, "503 database_unavailable": 12 }`. */
export function tally<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}
