/**
 * `npm run bench:memory`: Troupe's memory at rest (Linux /proc) on PGlite and PostgreSQL, a first start on an empty store and a
 * restart on the store it left. Figures: docs/benchmarks.md, Memory at rest; knobs: docs/benchmarks.md, Memory at rest: settings. */
import { existsSync } from 'node:fs';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT, runBench } from './support/children.ts';
import { envDatabaseUrl, envList, envNumber, envText, redactUrl } from './support/env.ts';
import { processMemory, processTree } from './support/proc.ts';
import { markdownTable, median, writeResults } from './support/report.ts';
import { callJson, freshStore, startTroupe, type Troupe } from './support/troupe.ts';

const BACKENDS = ['pglite', 'postgres'] as const;
const STARTS = ['first', 'restart'] as const;
const MB = 2 ** 20;
if (process.argv.length > 2) throw new Error('bench:memory takes BENCH_* variables (docs/benchmarks.md), not arguments');
const cfg = {
  runs: envNumber('BENCH_RUNS', 3, 1), settleMs: envNumber('BENCH_SETTLE_MS', 10_000, 0),
  idleWindowMs: envNumber('BENCH_IDLE_WINDOW_MS', 2_000, 100), backends: envList('BENCH_BACKENDS', BACKENDS), databaseUrl: envDatabaseUrl(),
};
const [compareLabel, compareDir] = envText('BENCH_COMPARE')?.split('=') ?? [];
if (compareLabel !== undefined && !(compareLabel && compareDir && existsSync(join(compareDir, 'src', 'main.ts')))) {
  throw new Error('BENCH_COMPARE takes label=/path/to/a/troupe/checkout (with src/main.ts)');
}
const trees = [{ label: 'current', dir: ROOT }, ...(compareLabel && compareDir ? [{ label: compareLabel, dir: resolve(compareDir) }] : [])];
const sumRss = (pids: number[]) => pids.reduce((sum, p) => sum + (processMemory(p)?.rss || 0), 0);
const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;
/** One start: time to listening, the peaks (VmHWM; the process tree's RSS sampled every 50 ms), idle RSS, then a graceful stop. */
async function measureStart(dir: string, settings: Record<string, string>) {
  const t0 = performance.now();
  const seen = { treePeak: 0, processes: 1 };
  let pid = 0;
  const sample = () => {
    const tree = pid ? processTree(pid) : [];
    seen.processes = Math.max(seen.processes, tree.length);
    seen.treePeak = Math.max(seen.treePeak, sumRss(tree));
  };
  const sampler = setInterval(sample, 50);
  let troupe: Troupe | null = null;
  try {
    troupe = await startTroupe({ cwd: dir, settings, key: null, readyTimeoutMs: 120_000, onSpawn: (p) => (pid = p) });
    const startupMs = Math.round(performance.now() - t0);
    await sleep(cfg.settleMs);
    for (const path of ['/healthz', '/readyz']) await callJson(troupe, 'GET', path, undefined, 200);
    const idle: number[] = [];
    for (const end = performance.now() + cfg.idleWindowMs; performance.now() < end; await sleep(100)) idle.push(sumRss(processTree(pid)));
    sample();
    const mem = processMemory(pid);
    if (!mem) throw new Error('troupe exited while measured');
    const { treePeak, processes } = seen;
    return { startupMs, peakMb: mb(mem.peakRss), treePeakMb: mb(treePeak), idleRssMb: mb(median(idle)), processes, threads: mem.threads };
  } finally {
    clearInterval(sampler);
    await troupe?.stop(15_000);
  }
}
const stat = (v: number[]) => ({ median: median(v), min: Math.min(...v), max: Math.max(...v) });
const cell = (s: ReturnType<typeof stat>) => `${s.median.toFixed(0)} (${s.min.toFixed(0)}–${s.max.toFixed(0)})`;
runBench('bench:memory', 60 * 60_000, async ({ stamp }) => {
  const host = { node: process.version, nproc: availableParallelism(), cpuModel: cpus()[0]?.model ?? 'unknown',
    totalMemMb: Math.round(totalmem() / MB) };
  const results: (Awaited<ReturnType<typeof measureStart>> & { tree: string; backend: string; start: string; run: number })[] = [];
  for (const backend of cfg.backends) {
    for (let run = 1; run <= cfg.runs; run++) {
      // Alternating order, so neither checkout always starts right after the other.
      for (const tree of run % 2 === 1 ? trees : [...trees].reverse()) {
        const store = await freshStore(backend, cfg.databaseUrl);
        try {
          for (const start of STARTS) results.push({ tree: tree.label, backend, start, run, ...(await measureStart(tree.dir, store.env)) });
        } finally {
          await store.dispose();
        }
      }
    }
  }
  const summary = cfg.backends.flatMap((backend) => STARTS.flatMap((start) => trees.map(({ label: tree }) => {
    const mine = results.filter((r) => r.tree === tree && r.backend === backend && r.start === start);
    const of = (key: 'startupMs' | 'peakMb' | 'treePeakMb' | 'idleRssMb' | 'threads') => stat(mine.map((r) => r[key]));
    return { tree, backend, start, runs: mine.length, processes: Math.max(...mine.map((r) => r.processes)), startupMs: of('startupMs'),
      peakMb: of('peakMb'), treePeakMb: of('treePeakMb'), idleRssMb: of('idleRssMb'), threads: of('threads') };
  })));
  /** The figure, and for the current checkout its ratio to the compared one. */
  const withRatio = (s: (typeof summary)[number], key: 'peakMb' | 'idleRssMb') => {
    const base = summary.find((o) => o.tree !== 'current' && o.backend === s.backend && o.start === s.start);
    return cell(s[key]) + (s.tree === 'current' && base ? ` ×${(s[key].median / base[key].median).toFixed(2)}` : '');
  };
  const header = ['checkout', 'backend', 'start', 'runs', 'to listening (ms)', 'peak, VmHWM (MB)', 'peak of tree, sampled (MB)',
    'processes', 'idle RSS (MB)', 'threads'];
  const table = markdownTable(header, summary.map((s) => [s.tree, s.backend, s.start, s.runs, cell(s.startupMs), withRatio(s, 'peakMb'),
    cell(s.treePeakMb), s.processes, withRatio(s, 'idleRssMb'), cell(s.threads)]), 'lllrrrrrrr');
  const markdown = `${table}\n\nMedian (min–max) of ${cfg.runs} run(s); 'first' starts on an empty store (PGlite runs initdb), ` +
    `'restart' on the store the first start left. Idle RSS = median over ${cfg.idleWindowMs} ms after ${cfg.settleMs} ms settle + ` +
    `GET /healthz, /readyz; ×: current / ${trees[1]?.label ?? 'baseline'}. ${host.nproc} CPUs (${host.cpuModel}), ` +
    `${host.totalMemMb} MB RAM, node ${host.node}.`;
  const config = { ...cfg, databaseUrl: redactUrl(cfg.databaseUrl), trees };
  const paths = await writeResults('memory', stamp, { benchmark: 'memory', stamp, config, machine: host, summary, results }, markdown);
  process.stdout.write(`\n${markdown}\n\nwrote ${paths.json}\n`);
});
