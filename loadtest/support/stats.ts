/** Percentile summaries of latency samples (milliseconds). */

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
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

export function sortedCopy(values: readonly number[]): Float64Array {
  return Float64Array.from(values).sort();
}

export function summarize(values: readonly number[]): Summary {
  const sorted = sortedCopy(values);
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] ?? Number.NaN),
  };
}

/**
 * A cheap noise floor for percentile comparisons: split one run's samples into two interleaved
 * halves (even and odd request numbers) and report how far their percentiles differ. Two
 * halves of the same run differ only by chance, so an added latency smaller than this is not
 * distinguishable from zero.
 */
export function splitHalfSpread(values: readonly number[], p: number): number {
  const even: number[] = [];
  const odd: number[] = [];
  values.forEach((v, i) => (i % 2 === 0 ? even : odd).push(v));
  if (even.length === 0 || odd.length === 0) return Number.NaN;
  return Math.abs(percentile(sortedCopy(even), p) - percentile(sortedCopy(odd), p));
}

/** JSON-safe rounding to microseconds (NaN becomes null). */
export function round3(value: number): number | null {
  return Number.isFinite(value) ? Math.round(value * 1000) / 1000 : null;
}

export function roundSummary(s: Summary): Record<keyof Summary, number | null> {
  return {
    count: s.count,
    mean: round3(s.mean),
    p50: round3(s.p50),
    p90: round3(s.p90),
    p99: round3(s.p99),
    p999: round3(s.p999),
    max: round3(s.max),
  };
}
