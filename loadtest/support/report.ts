/** The report writer every benchmark shares (JSON plus Markdown under loadtest/results/), tables and percentile summaries. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './troupe.ts';

export const RESULTS_DIR = join(ROOT, 'loadtest', 'results');

/** Writes `<name>-<stamp>.json` and `.md`; returns both paths. */
export async function writeResults(name: string, stamp: string, json: unknown, markdown: string): Promise<{ json: string; markdown: string }> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const paths = { json: join(RESULTS_DIR, `${name}-${stamp}.json`), markdown: join(RESULTS_DIR, `${name}-${stamp}.md`) };
  await writeFile(paths.json, `${JSON.stringify(json, null, 2)}\n`);
  await writeFile(paths.markdown, `${markdown}\n`);
  return paths;
}

/** A Markdown table; `align` holds `l` or `r` per column (default: the first left, the others right). */
export function markdownTable(header: readonly string[], rows: readonly (readonly (string | number)[])[], align?: string): string {
  const marks = header.map((_, i) => ((align ?? `l${'r'.repeat(header.length)}`).charAt(i) === 'r' ? '---:' : '---'));
  return [header, marks, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** A number with `digits` decimals; `fallback` when missing. */
export function fixed(value: number | null | undefined, digits = 2, fallback = '—'): string {
  return value === null || value === undefined || !Number.isFinite(value) ? fallback : value.toFixed(digits);
}
export const ms = (value: number | null | undefined): string => fixed(value);

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] ?? Number.NaN;
}

export function summarize(values: readonly number[]): Summary {
  const s = Float64Array.from(values).sort();
  const mean = s.length === 0 ? Number.NaN : s.reduce((a, b) => a + b, 0) / s.length;
  return { count: s.length, mean, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), p999: percentile(s, 99.9), max: s.length === 0 ? Number.NaN : (s[s.length - 1] ?? Number.NaN) };
}

/**
 * A cheap noise floor: the percentile of the even-numbered samples minus that of the odd ones.
 * Two halves of one run differ only by chance, so an added latency smaller than this is noise.
 */
export function splitHalfSpread(values: readonly number[], p: number): number {
  const halves = [values.filter((_, i) => i % 2 === 0), values.filter((_, i) => i % 2 === 1)].map((h) => Float64Array.from(h).sort());
  return halves[0]?.length && halves[1]?.length ? Math.abs(percentile(halves[0], p) - percentile(halves[1], p)) : Number.NaN;
}

/** JSON-safe rounding to microseconds (NaN becomes null). */
export const round3 = (value: number): number | null => (Number.isFinite(value) ? Math.round(value * 1000) / 1000 : null);

export function roundSummary(s: Summary): Record<keyof Summary, number | null> {
  return { count: s.count, mean: round3(s.mean), p50: round3(s.p50), p90: round3(s.p90), p99: round3(s.p99), p999: round3(s.p999), max: round3(s.max) };
}
