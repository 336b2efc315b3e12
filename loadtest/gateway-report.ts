/** The tables of `npm run bench:gateway` and the check of issue 12's goals against them. */
import type { TargetRun } from './support/load.ts';
import type { CpuWindow } from './support/proc.ts';
import { markdownTable, ms, summarize } from './support/report.ts';

/** Per target: percentiles, failures, generator lag (p99 ms: large means the client was slow) and each percentile minus direct's. */
export function phaseResult(runs: readonly TargetRun[]) {
  const direct = runs.find((r) => r.label === 'direct');
  const directTtfc = direct ? summarize(direct.ttfc) : null;
  const directTotal = direct ? summarize(direct.total) : null;
  return {
    targets: runs.map((r) => {
      const ttfc = summarize(r.ttfc);
      const total = summarize(r.total);
      const failures = r.scheduled - r.ok;
      return {
        label: r.label, scheduled: r.scheduled, ok: r.ok, failures, errors: r.errors, errorSample: Object.values(r.errorSamples)[0] ?? null,
        ttfc: { p50: ttfc.p50, p99: ttfc.p99 }, total: { p50: total.p50, p99: total.p99 }, lagP99: summarize(r.lag).p99,
        added: {
          ttfcP50: directTtfc ? ttfc.p50 - directTtfc.p50 : null, ttfcP99: directTtfc ? ttfc.p99 - directTtfc.p99 : null,
          totalP50: directTotal ? total.p50 - directTotal.p50 : null, totalP99: directTotal ? total.p99 - directTotal.p99 : null,
        },
      };
    }),
  };
}

export type PhaseResult = ReturnType<typeof phaseResult>;
type TargetResult = PhaseResult['targets'][number];

export interface CpuRow {
  label: string;
  process: string;
  rate: number;
  calls: number;
  failures: number;
  cpuMsPerCall: number | null;
  stream?: boolean;
  engine?: string;
  /** Reads only: autocannon's latency. */
  latencyMs?: { p50: number; p99: number };
}

type Mode = 'streaming' | 'non-streaming';

export interface GatewayResult {
  config: Record<string, unknown>;
  machine: Record<string, unknown>;
  git: { head: string; dirtySrc: string[] };
  startedAt: string;
  proxy: (PhaseResult & { rate: number; mode: Mode; cpuPercent: CpuWindow | null })[];
  cpu: CpuRow[];
  perform: (PhaseResult & { rate: number }) | null;
  reads: CpuRow[];
  notes: string[];
  /** With BENCH_CPU_PROF: Troupe's top frames. */
  profile: string | null;
}

const COLUMNS = ['pipe', 'troupe-upstream-model', 'troupe-character', 'portkey'] as const;
const HEADINGS = ['bare pipe (floor)', 'Troupe, upstream model', 'Troupe, character as model', 'Portkey'];

function find(r: GatewayResult, rate: number, mode: Mode, label: string): TargetResult | undefined {
  return r.proxy.find((p) => p.rate === rate && p.mode === mode)?.targets.find((t) => t.label === label);
}

function cpuOf(rows: readonly CpuRow[], label: string, stream: boolean): number | null {
  return rows.find((c) => c.label === label && c.stream === stream)?.cpuMsPerCall ?? null;
}

/** The table, one block of rows per rate, plus CPU per call. */
function summaryTable(r: GatewayResult): string {
  const rows: string[][] = [];
  const rates = [...new Set(r.proxy.map((p) => p.rate))];
  for (const rate of rates) {
    const cell = (mode: Mode, pick: (t: TargetResult) => number | null) => (label: string) => {
      const t = find(r, rate, mode, label);
      return t ? ms(pick(t)) : '—';
    };
    const failures = (label: string) => {
      const s = find(r, rate, 'streaming', label);
      const n = find(r, rate, 'non-streaming', label);
      return s || n ? `${s?.failures ?? '—'} / ${n?.failures ?? '—'}` : '—';
    };
    rows.push([`streaming, time to first content, p50 @ ${rate}/s`, ...COLUMNS.map(cell('streaming', (t) => t.added.ttfcP50))]);
    rows.push([`streaming, time to first content, p99 @ ${rate}/s`, ...COLUMNS.map(cell('streaming', (t) => t.added.ttfcP99))]);
    rows.push([`non-streaming, total, p50 @ ${rate}/s`, ...COLUMNS.map(cell('non-streaming', (t) => t.added.totalP50))]);
    rows.push([`non-streaming, total, p99 @ ${rate}/s`, ...COLUMNS.map(cell('non-streaming', (t) => t.added.totalP99))]);
    rows.push([`failures (streaming / non-streaming) @ ${rate}/s`, ...COLUMNS.map(failures)]);
  }
  const cpuRate = r.cpu[0]?.rate ?? '?';
  if (r.cpu.length > 0) rows.push([`server CPU per stream at ${cpuRate} req/s`, ...COLUMNS.map((l) => ms(cpuOf(r.cpu, l, true)))]);
  if (r.cpu.length > 0) rows.push([`server CPU per non-streaming call at ${cpuRate} req/s`,
    ...COLUMNS.map((l) => ms(cpuOf(r.cpu, l, false)))]);
  return markdownTable(['added to direct (ms)', ...HEADINGS], rows, 'lrrrr');
}

/** Absolute figures of every target, direct included. */
function detailTable(r: GatewayResult): string {
  const other = (p: GatewayResult['proxy'][number]) => p.cpuPercent?.other?.toFixed(0) ?? '?';
  const rows = r.proxy.flatMap((p) => p.targets.map((t) => [
    String(p.rate), p.mode, t.label, ms(t.ttfc.p50), ms(t.ttfc.p99), ms(t.total.p50), ms(t.total.p99), `${t.ok}/${t.scheduled}`,
    Object.entries(t.errors).map(([k, n]) => `${k}:${n}`).join(' ') || '0', ms(t.lagP99), other(p),
  ]));
  return markdownTable(['req/s', 'mode', 'target', 'first content p50', 'p99', 'total p50', 'p99', 'ok', 'errors', 'client lag p99',
    'other CPU %'], rows, 'rllrrrrrrrr');
}

function performTable(r: GatewayResult): string {
  const p = r.perform?.targets.find((t) => t.label === 'perform');
  const d = r.perform?.targets.find((t) => t.label === 'direct');
  if (!p || !d || !r.perform) return '';
  return markdownTable(
    ['at req/s', 'direct total p50 / p99', 'POST /perform total p50 / p99', 'added p50', 'added p99', 'failures'],
    [[String(r.perform.rate), `${ms(d.total.p50)} / ${ms(d.total.p99)}`, `${ms(p.total.p50)} / ${ms(p.total.p99)}`, ms(p.added.totalP50),
      ms(p.added.totalP99), `${p.failures} / ${d.failures}`]],
    'rrrrrr',
  );
}

function readsTable(r: GatewayResult): string {
  if (r.reads.length === 0) return '';
  const bareUws = r.reads.find((c) => c.process === 'bare-uws')?.rate;
  const rows = r.reads.map((c) => [
    c.engine ?? '?', c.process, String(c.rate), bareUws ? (c.rate / bareUws).toFixed(2) : '—',
    ms(c.latencyMs?.p50), ms(c.latencyMs?.p99), String(c.failures),
    c.cpuMsPerCall === null ? '—' : `${(c.cpuMsPerCall * 1000).toFixed(1)} µs`,
  ]);
  return markdownTable(['engine', 'server', 'req/s', 'req/s ÷ bare uWS', 'p50 (ms)', 'p99 (ms)', 'non-2xx / errors',
    'server CPU per request'], rows, 'llrrrrrr');
}

/** Issue 12 item 2, goal by goal: met, not met, or not measured. */
export function goals(r: GatewayResult): string[] {
  /** 'not measured' when a figure is missing. */
  const verdict = (figures: (number | null | undefined)[], test: (...v: number[]) => boolean) =>
    figures.some((f) => f === null || f === undefined) ? 'not measured' : test(...(figures as number[])) ? 'MET' : 'NOT met';
  const rates = [...new Set(r.proxy.map((p) => p.rate))];
  const top = Math.max(...r.proxy.map((p) => p.rate), 0);
  const added = (rate: number, mode: Mode, label: string) => find(r, rate, mode, label)?.added;
  const cpu = (label: string, stream: boolean) => cpuOf(r.cpu, label, stream);
  const lines = rates.map((rate) => {
    const [f, t] = [added(rate, 'streaming', 'pipe'), added(rate, 'streaming', 'troupe-character')];
    const within = (f50: number, t50: number, f99: number, t99: number) => t50 <= f50 + 0.3 && t99 <= 2 * Math.max(f99, 0);
    const ok = verdict([f?.ttfcP50, t?.ttfcP50, f?.ttfcP99, t?.ttfcP99], within);
    return `streaming first content @ ${rate}/s: p50 ≤ floor + 0.3 ms and p99 ≤ 2x floor: ${ok}`;
  });
  const topFailures = ['troupe-character', 'troupe-upstream-model'].map((l) => find(r, top, 'streaming', l)?.failures);
  if (r.proxy.length > 0) lines.push(`no streaming failures at ${top}/s: ${verdict(topFailures, (...f) => f.every((x) => x === 0))}`);
  lines.push(`CPU per stream ≤ 1.5x floor: ${verdict([cpu('troupe-character', true), cpu('pipe', true)], (t, f) => t <= 1.5 * f)}`);
  const perCall = [cpu('troupe-character', false), cpu('portkey', false)];
  lines.push(`CPU per non-streaming call below Portkey's: ${verdict(perCall, (t, p) => t < p)}`);
  for (const rate of rates) {
    const [t, p] = [added(rate, 'non-streaming', 'troupe-character'), added(rate, 'non-streaming', 'portkey')];
    const ok = verdict([t?.totalP50, p?.totalP50, t?.totalP99, p?.totalP99], (t50, p50, t99, p99) => t50 < p50 && t99 < p99);
    lines.push(`non-streaming added p50 and p99 below Portkey's @ ${rate}/s: ${ok}`);
  }
  const perform = r.perform?.targets.find((t) => t.label === 'perform')?.added;
  const performOk = verdict([perform?.totalP50, perform?.totalP99], (p50, p99) => p50 <= 1 && p99 <= 3);
  lines.push(`perform added p50 ≤ 1 ms and p99 ≤ 3 ms: ${performOk}`);
  for (const engine of ['uws', 'node']) {
    const mine = r.reads.filter((c) => c.engine === engine);
    const [troupe, bare] = ['troupe', 'bare'].map((name) => mine.find((c) => c.process.startsWith(name))?.cpuMsPerCall);
    lines.push(`GET /characters/{id} CPU ≤ 2x bare ${engine}: ${verdict([troupe, bare], (t, b) => t <= 2 * b)}`);
  }
  return lines;
}

/** Windows where the machine was busy with other work, or the client fell behind its schedule. */
function noiseWarnings(r: GatewayResult): string[] {
  const noisy = r.proxy.filter((p) => (p.cpuPercent?.other ?? 0) > 40 || p.targets.some((t) => t.lagP99 > 10));
  if (noisy.length === 0) return [];
  const lag = (p: GatewayResult['proxy'][number]) => Math.max(...p.targets.map((t) => t.lagP99)).toFixed(0);
  const others = (p: GatewayResult['proxy'][number]) => p.cpuPercent?.other?.toFixed(0) ?? '?';
  const what = noisy.map((p) => `${p.mode} @ ${p.rate}/s (others ${others(p)}% of a core, client lag p99 up to ${lag(p)} ms)`);
  return [`WARNING: noisy windows, their tails include waiting for CPU taken by other work: ${what.join('; ')}.`];
}

const LEGEND = [
  "Added = the target's percentile minus the direct call's percentile in the same interleaved schedule (ms).",
  'CPU per call: the proxying process alone under load, from /proc (10 ms ticks), divided by the calls of the window.',
  '"client lag" = how late the generator sent (a busy machine); "other CPU %" = % of one core used by processes outside the bench.',
].join(' ');

export function gatewayMarkdown(r: GatewayResult): string {
  const notes = [...r.notes, ...noiseWarnings(r)];
  const chat = r.proxy.length > 0 || r.cpu.length > 0;
  const measured = goals(r).filter((g) => !g.endsWith('not measured'));
  const changed = r.git.dirtySrc.length > 0 ? `, src/ changed: ${r.git.dirtySrc.length} files` : '';
  const parts = [
    `## bench:gateway, ${r.startedAt} (HEAD ${r.git.head}${changed})`,
    ...(chat ? [summaryTable(r), LEGEND] : []),
    ...(r.proxy.length > 0 ? ['### Every target', detailTable(r)] : []),
    ...(r.perform ? ['### Perform', performTable(r)] : []),
    ...(r.reads.length > 0 ? ['### GET /characters/{id} (autocannon, each server alone; bench:http)', readsTable(r)] : []),
    ...(measured.length > 0 ? ['### Goals (issue 12, item 2)', measured.map((g) => `- ${g}`).join('\n')] : []),
    ...(notes.length > 0 ? ['### Notes', notes.map((n) => `- ${n}`).join('\n')] : []),
    ...(r.profile ? ['### CPU profile of Troupe', `\`\`\`\n${r.profile}\n\`\`\``] : []),
  ];
  return parts.join('\n\n');
}
