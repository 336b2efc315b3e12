/**
 * Part (a) of the documents benchmark: extraction throughput through the real ParserPool
 * (workers/parser-pool.ts) with the server's limits. Per format, a fresh pool parses the file
 * once (cold: includes starting the first worker and loading its parser), then the same pool
 * parses it `warmRuns` more times (warm). Also times chunkSections on the result, which runs on
 * the server's main thread after every parse.
 */
import { chunkSections } from '../../src/documents/chunker.ts';
import type { DocumentMimeType, ParseLimits } from '../../src/documents/types.ts';
import { ParserPool } from '../../workers/parser-pool.ts';
import { summarize } from '../support/stats.ts';

/** The limits src/server.ts gives its pool, with the config's defaults. */
export const SERVER_LIMITS: ParseLimits = {
  maxPages: 2_000,
  maxPixels: 40_000_000,
  maxUncompressedBytes: 256 * 1024 * 1024,
  maxZipEntries: 10_000,
  maxTextChars: 20_000_000,
};

export interface ExtractInput {
  id: string;
  mimeType: DocumentMimeType;
  bytes: Uint8Array;
  pages: number | null;
}

export interface ExtractResult {
  id: string;
  mimeType: DocumentMimeType;
  bytes: number;
  pages: number | null;
  chars: number;
  coldMs: number;
  warmMs: number[];
  /** Median warm parse: MB/s (MiB) and pages/s. */
  warmMBps: number;
  warmPagesPerSec: number | null;
  coldMBps: number;
  coldPagesPerSec: number | null;
  chunks: number;
  /** chunkSections on the main thread, median of the warm runs. */
  chunkMs: number;
}

export async function measureExtraction(input: ExtractInput, warmRuns: number, log: (line: string) => void): Promise<ExtractResult> {
  const pool = new ParserPool({ maxThreads: 1, maxMemoryMb: 2_048, timeoutMs: 600_000, limits: SERVER_LIMITS });
  try {
    const runs: number[] = [];
    const chunkTimes: number[] = [];
    let chars = 0;
    let chunks = 0;
    for (let run = 0; run <= warmRuns; run++) {
      const copy = new Uint8Array(input.bytes); // parse() transfers (detaches) its argument
      const t0 = performance.now();
      const result = await pool.parse(copy, input.mimeType);
      const ms = performance.now() - t0;
      if (!result.ok) throw new Error(`${input.id}: the parse failed: ${result.error}`);
      const t1 = performance.now();
      const chunked = chunkSections(result.sections, { maxTokens: 400, overlapTokens: 60 });
      if (run > 0) chunkTimes.push(performance.now() - t1);
      chars = result.sections.reduce((sum, s) => sum + s.text.length, 0);
      chunks = chunked.length;
      runs.push(ms);
      log(`extract ${input.id}: ${run === 0 ? 'cold' : `warm ${run}`} ${ms.toFixed(0)} ms`);
    }
    const [coldMs, ...warmMs] = runs as [number, ...number[]];
    const warm = summarize(warmMs).p50;
    const mb = input.bytes.byteLength / 1_048_576;
    return {
      id: input.id,
      mimeType: input.mimeType,
      bytes: input.bytes.byteLength,
      pages: input.pages,
      chars,
      coldMs,
      warmMs,
      warmMBps: mb / (warm / 1000),
      warmPagesPerSec: input.pages === null ? null : input.pages / (warm / 1000),
      coldMBps: mb / (coldMs / 1000),
      coldPagesPerSec: input.pages === null ? null : input.pages / (coldMs / 1000),
      chunks,
      chunkMs: summarize(chunkTimes).p50,
    };
  } finally {
    await pool.close();
  }
}
