/** Markdown tables and notes for the chat-stream benchmark. */
import type { Added, PhaseSummary, RateResult } from './analysis.ts';
import { SUSTAIN } from './analysis.ts';

const ms = (v: number): string => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');
const signed = (v: number): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${v.toFixed(2)}` : 'n/a');
const pct = (v: number | null | undefined): string => (v === null || v === undefined ? '?' : v.toFixed(0));

function errorsCell(p: PhaseSummary): string {
  if (p.errorCount === 0) return '0';
  const kinds = Object.entries(p.errors).map(([k, n]) => `${k}:${n}`).join(' ');
  return `${p.errorCount} (${kinds})`;
}

/** One row per engine, rate and path: what the client saw. */
export function phaseTable(results: readonly RateResult[]): string {
  const header = ['engine', 'offered req/s', 'path', 'achieved req/s', 'TTFC p50', 'TTFC p99', 'total p50', 'total p99', 'errors', 'max in flight', 'gen. lag p99', 'CPU % troupe / upstream / bench / other'];
  const align = ['---', '---:', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:'];
  const rows: string[][] = [];
  for (const r of results) {
    for (const p of [r.direct, r.troupe]) {
      const c = p.cpu;
      rows.push([
        r.engine,
        String(r.rate),
        p.target,
        `${p.achievedRps.toFixed(0)}${p.sustained ? '' : ' ✗'}`,
        ms(p.ttfc.p50),
        ms(p.ttfc.p99),
        ms(p.total.p50),
        ms(p.total.p99),
        errorsCell(p),
        String(p.maxInFlight),
        `${ms(p.lag.p99)}${p.generatorLimited ? ' ⚠' : ''}`,
        `${pct(c.children.troupe)} / ${pct(c.children.upstream)} / ${pct(c.bench)} / ${pct(c.other)}`,
      ]);
    }
  }
  return [header, align, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

function addedCells(a: Added): string[] {
  return [signed(a.p50), `${signed(a.p99)} (±${Number.isFinite(a.p99Noise) ? a.p99Noise.toFixed(2) : '?'})`];
}

/** One row per engine and rate: via Troupe minus direct, percentile by percentile. */
export function addedTable(results: readonly RateResult[]): string {
  const header = ['engine', 'offered req/s', 'added TTFC p50', 'added TTFC p99 (±noise)', 'added total p50', 'added total p99 (±noise)', 'p99 added ≤ 1 ms', 'sustained'];
  const align = ['---', '---:', '---:', '---:', '---:', '---:', '---', '---'];
  const rows = results.map((r) => {
    const worst = Math.max(r.added.ttfc.p99, r.added.total.p99);
    return [
      r.engine,
      String(r.rate),
      ...addedCells(r.added.ttfc),
      ...addedCells(r.added.total),
      Number.isFinite(worst) ? (worst <= 1 ? 'yes' : 'no') : 'n/a',
      r.sustained ? 'yes' : `no: ${[...r.direct.verdict.map((v) => `direct ${v}`), ...r.troupe.verdict.map((v) => `troupe ${v}`)].join('; ')}`,
    ];
  });
  return [header, align, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** Per engine: the highest sustained rate and whether the goal holds there. */
export function headline(results: readonly RateResult[], engines: readonly string[]): string[] {
  const lines: string[] = [];
  for (const engine of engines) {
    const mine = results.filter((r) => r.engine === engine);
    if (mine.length === 0) continue;
    const best = mine.filter((r) => r.sustained).at(-1);
    if (!best) {
      lines.push(`${engine}: no offered rate was sustained (lowest tried: ${mine[0]?.rate ?? '?'} req/s).`);
      continue;
    }
    const worst = Math.max(best.added.ttfc.p99, best.added.total.p99);
    const firstFail = mine.find((r) => r.rate > best.rate && !r.sustained);
    const limit = firstFail
      ? `; ${firstFail.rate} req/s was not (${[...firstFail.direct.verdict.map((v) => `direct: ${v}`), ...firstFail.troupe.verdict.map((v) => `troupe: ${v}`)].join('; ')})`
      : '; no higher rate failed (raise BENCH_RATES to find the limit)';
    const gen = best.troupe.generatorLimited || best.direct.generatorLimited
      ? ' The load generator fell behind its schedule at that rate (busy, or starved of CPU), so part of the latency is the client\'s.'
      : '';
    lines.push(
      `${engine}: highest sustained rate ${best.rate} req/s${limit}. There, added p99 is ${signed(best.added.ttfc.p99)} ms on TTFC and ` +
        `${signed(best.added.total.p99)} ms on total time (p50 ${signed(best.added.ttfc.p50)} / ${signed(best.added.total.p50)} ms): ` +
        `goal p99 ≤ 1 ms ${worst <= 1 ? 'MET' : 'NOT met'}.${gen}`,
    );
  }
  return lines;
}

export const LEGEND = [
  'Legend: times in ms, measured by the client from handing the request to node:http; TTFC = first body bytes (the first SSE event),',
  'total = end of the response. "added" = via-Troupe percentile minus direct percentile at the same offered rate (not a per-request',
  'difference); ±noise = root-sum-square of both runs\' split-half p99 spread (two halves of one run differ only by chance).',
  `achieved = successful completions inside the measured window per second; ✗ = rate not sustained (> ${SUSTAIN.maxErrorRate * 100}% errors,`,
  `< ${SUSTAIN.minAchievedRatio * 100}% of the offered rate completed, TTFC p50 growing > ${SUSTAIN.maxQueueGrowthMs} ms across the window,`,
  'or TTFC p99 above the ceiling BENCH_MAX_TTFC_P99_MS);',
  '⚠ = load generator late (event loop > 90% busy, or schedule lag p99 > 10 ms: busy or starved of CPU). CPU in % of one core (200% = the whole',
  '2-core machine) during the measured window; "other" includes the kernel\'s loopback work.',
].join('\n');

/** Other workloads on the machine skew everything: say so, per phase, when they were busy. */
export function noiseNotes(results: readonly RateResult[], backgroundPercent: number | null, limitPercent = 40): string[] {
  const phases = results.flatMap((r) => [r.direct, r.troupe].map((p) => ({ id: `${r.engine}@${r.rate}/${p.target}`, other: p.cpu.other })));
  const known = phases.filter((p): p is { id: string; other: number } => p.other !== null);
  if (known.length === 0) return [];
  const min = Math.min(...known.map((p) => p.other));
  const max = Math.max(...known.map((p) => p.other));
  const lines = [`Other processes on the machine (not this benchmark) used ${min.toFixed(0)}–${max.toFixed(0)}% of one core during the measured windows` +
    (backgroundPercent === null ? '.' : `; ${backgroundPercent.toFixed(0)}% just before the runs.`)];
  const noisy = known.filter((p) => p.other > limitPercent);
  if (noisy.length > 0) {
    lines.push(`WARNING: in ${noisy.length} of ${known.length} windows other processes used more than ${limitPercent}% of a core ` +
      `(${noisy.map((p) => `${p.id} ${p.other.toFixed(0)}%`).join(', ')}): those latencies include waiting for CPU taken by someone else.`);
  }
  return lines;
}

/** Where the added latency sits: the request leg (into Troupe and out to the upstream) or the relay of chunks back. */
export function legsTable(results: readonly RateResult[]): string {
  const header = ['engine', 'offered req/s', 'request leg direct p50 / p99', 'request leg via Troupe p50 / p99', 'first-chunk relay direct / via Troupe p50', 'first-chunk relay direct / via Troupe p99', 'last-chunk relay direct / via Troupe p99'];
  const align = ['---', '---:', '---:', '---:', '---:', '---:', '---:'];
  const rows = results
    .filter((r) => r.direct.legs && r.troupe.legs)
    .map((r) => {
      const d = r.direct.legs;
      const t = r.troupe.legs;
      if (!d || !t) return [];
      return [
        r.engine,
        String(r.rate),
        `${ms(d.request.p50)} / ${ms(d.request.p99)}`,
        `${ms(t.request.p50)} / ${ms(t.request.p99)}`,
        `${ms(d.firstRelay.p50)} / ${ms(t.firstRelay.p50)}`,
        `${ms(d.firstRelay.p99)} / ${ms(t.firstRelay.p99)}`,
        `${ms(d.lastRelay.p99)} / ${ms(t.lastRelay.p99)}`,
      ];
    });
  if (rows.length === 0) return '';
  return [header, align, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

export const LEGS_LEGEND = [
  'Legs (ms, from the upstream\'s own timestamps of the same requests, one monotonic clock): request leg = client sends until the',
  'upstream has the request body (via Troupe: all of Troupe\'s request handling plus its call to the upstream); first-chunk relay =',
  'the upstream writes its first chunk until the client has the first bytes (via Troupe: reading, re-encoding and writing it);',
  'last-chunk relay = the upstream ends the response until the client has the end.',
].join('\n');
