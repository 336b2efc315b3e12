import type { CpuShares } from './cpu.ts';
import type { LoadStats } from './load.ts';

export interface TargetResult {
  id: string;
  target: 'troupe' | 'bare';
  engine: 'node' | 'uws';
  url: string;
  nodeBinary: string;
  responseBytes: number;
  warmup: LoadStats | null;
  measured: LoadStats;
  /** Bytes the server wrote to stdout during the measured run (Troupe: its request logs). */
  stdoutBytes: number;
  /** CPU use during the measured run, in % of one core: the server child and this process. */
  cpu: CpuShares;
}

export interface Skipped {
  id: string;
  reason: string;
}

const TARGET_LABEL: Record<TargetResult['target'], string> = {
  troupe: 'Troupe GET /characters/{id}',
  bare: 'bare hello-world',
};

/** Markdown table; the ratio column compares every row with the bare uWS baseline. */
export function markdownTable(results: readonly TargetResult[]): string {
  const bareUws = results.find((r) => r.target === 'bare' && r.engine === 'uws');
  const base = bareUws?.measured.requestsPerSec.average;
  const rows = results.map((r) => {
    const m = r.measured;
    const ratio = base ? (m.requestsPerSec.average / base).toFixed(2) : 'n/a';
    const failures = `${m.non2xx} / ${m.errors}`;
    return [
      TARGET_LABEL[r.target],
      r.engine,
      Math.round(m.requestsPerSec.average).toLocaleString('en-US'),
      ms(m.latencyMs.p50),
      ms(m.latencyMs.p99),
      ratio,
      failures,
    ];
  });
  const header = ['target', 'engine', 'req/s (avg)', 'p50 (ms)', 'p99 (ms)', 'req/s ÷ bare uWS', 'non-2xx / errors'];
  const align = ['---', '---', '---:', '---:', '---:', '---:', '---:'];
  return [header, align, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** autocannon records whole milliseconds; show decimals only when there are some. */
function ms(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

/** One line per Troupe engine: its throughput as a fraction of the bare uWS handler's. */
export function ratioNotes(results: readonly TargetResult[]): string[] {
  const bareUws = results.find((r) => r.target === 'bare' && r.engine === 'uws');
  if (!bareUws) return ['No bare uWS baseline was measured, so there is no Troupe ÷ bare uWS ratio.'];
  const base = bareUws.measured.requestsPerSec.average;
  const notes: string[] = [];
  if (boundBy(bareUws.cpu) !== 'server-bound') {
    notes.push(
      `The bare uWS server was not CPU-saturated (server ${bareUws.cpu.serverPercent?.toFixed(0) ?? '?'}%, bench process ` +
        `${bareUws.cpu.benchPercent.toFixed(0)}% of a core): its req/s is what this load generator reaches here, a floor ` +
        `of uWS's capacity, so the ratios below are upper bounds.`,
    );
  }
  return notes.concat(results
    .filter((r) => r.target === 'troupe')
    .map((r) => {
      const ratio = r.measured.requestsPerSec.average / base;
      const flag = ratio < 0.5 ? ' (less than half: see BENCH_CPU_PROF=1 for where the time goes)' : '';
      return `Troupe (${r.engine}) reaches ${(ratio * 100).toFixed(0)}% of the bare uWS req/s${flag}.`;
    }));
}

/**
 * Rough guess at what capped a run. autocannon is one JS thread, so the bench process near a
 * full core means the load generator, not the server, set the pace.
 */
function boundBy(cpu: CpuShares): string {
  if (cpu.serverPercent !== null && cpu.serverPercent >= 85) return 'server-bound';
  if (cpu.benchPercent >= 70) return 'likely load-generator-bound';
  return 'neither saturated';
}

/** Who was busy: with the load generator on the same machine, the slower side sets the pace. */
export function cpuNotes(results: readonly TargetResult[], backgroundPercent: number | null): string[] {
  if (results.length === 0) return [];
  const parts = results.map((r) => {
    const fmt = (v: number | null) => (v === null ? '?' : v.toFixed(0));
    // Server CPU per request is steadier than req/s when the machine is shared.
    const rps = r.measured.requestsPerSec.average;
    const perRequest = r.cpu.serverPercent === null || rps === 0 ? '?' : ((r.cpu.serverPercent / 100 / rps) * 1e6).toFixed(0);
    return `${r.id} ${fmt(r.cpu.serverPercent)} / ${fmt(r.cpu.benchPercent)} / ${fmt(r.cpu.otherPercent)} (${boundBy(r.cpu)}, server ${perRequest} µs CPU per request)`;
  });
  const lines = [`CPU % of one core during the measured runs (server / bench process with autocannon / other processes): ${parts.join('; ')}.`];
  if (backgroundPercent !== null) {
    lines.push(`Background load before the runs (bench idle): ${backgroundPercent.toFixed(0)}% of one core.`);
  }
  // "Other" includes kernel work for the loopback traffic, so compare it with the idle background.
  const limit = (backgroundPercent ?? 0) + 40;
  const noisy = results.filter((r) => (r.cpu.otherPercent ?? 0) > limit).map((r) => r.id);
  if (noisy.length > 0) {
    lines.push(`WARNING: other processes were busy (> ${limit.toFixed(0)}% of a core) during ${noisy.join(', ')}; those numbers are likely skewed.`);
  }
  return lines;
}
