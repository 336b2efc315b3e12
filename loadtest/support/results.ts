/** The report writer every benchmark shares: JSON plus Markdown under loadtest/results/, and table formatting. */
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

/** A Markdown table; `align` holds `l` or `r` per column. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[], align?: string): string {
  const marks = header.map((_, i) => ((align ?? '').charAt(i) === 'r' ? '---:' : '---'));
  return [header, marks, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** ms with two decimals; `—` for a missing value. */
export function ms(value: number | null | undefined): string {
  return value === null || value === undefined || !Number.isFinite(value) ? '—' : value.toFixed(2);
}
