/**
 * Troupe's memory at rest (Linux /proc): start-up time, start-up peak and idle RSS of `node src/main.ts`
 * on PGlite and PostgreSQL, for a first start on an empty store and a restart on the store it left.
 *   node loadtest/memory.ts [--runs 3] [--settle-ms 10000] [--idle-window-ms 2000] [--backends pglite,postgres]
 *     [--database-url postgres://postgres@127.0.0.1:5432/test] [--compare before=/path/to/other/checkout]
 * --compare measures another checkout (e.g. `git archive HEAD` unpacked, node_modules linked) in the
 * same run, interleaved run by run, so before and after share the machine's noise.
 * Peak: VmHWM of the server process, and the sampled sum over its process tree. Idle RSS: median
 * VmRSS over --idle-window-ms after --settle-ms and GET /healthz, /readyz. Each checkout also gets one
 * start with a module-logging hook, to list the packages that must not load at start.
 * Prints a Markdown table and writes loadtest/results/memory-<stamp>.{json,md}.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { logger, ROOT, runBench } from './support/children.ts';
import { redactUrl } from './support/env.ts';
import { processMemory, processTree } from './support/proc.ts';
import { markdownTable, median, writeResults } from './support/report.ts';
import { freshStore, startTroupe } from './support/troupe.ts';

const BACKENDS = ['pglite', 'postgres'] as const;
type Backend = (typeof BACKENDS)[number];
const STARTS = ['first', 'restart'] as const;
const MB = 2 ** 20;
/** Packages that load only in the parser worker (or the voice worker), never in the server at start. */
const NOT_AT_START = ['pdf-parse', 'pdfjs-dist', 'mammoth', 'htmlparser2', 'tesseract.js', 'tesseract.js-core', '@tesseract.js-data',
  'jszip',  '@livekit/agents', '@livekit/rtc-node', 'onnxruntime-node'];
const HOOK_SOURCE = "import{registerHooks}from'node:module';import{appendFileSync}from'node:fs';const f=process.env.BENCH_MODULE_LOG;" +
  "registerHooks({resolve(s,c,n){const r=n(s,c);appendFileSync(f,r.url+'\\n');return r}});";
const MODULE_HOOK = `data:text/javascript,${encodeURIComponent(HOOK_SOURCE)}`;
const log = logger('memory');
const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    'settle-ms': { type: 'string', default: '10000' },
    'idle-window-ms': { type: 'string', default: '2000' },
    backends: { type: 'string', default: BACKENDS.join(',') },
    'database-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/test' },
    compare: { type: 'string' },
  },
});
const intArg = (name: 'runs' | 'settle-ms' | 'idle-window-ms', min: number): number => {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer >= ${min}, got '${args[name]}'`);
  return value;
};
const trees: { label: string; dir: string }[] = [{ label: 'current', dir: ROOT }];
if (args.compare) {
  const [label, dir] = args.compare.split('=');
  if (!label || !dir || !existsSync(join(dir, 'src', 'main.ts'))) {
    throw new Error('--compare takes label=/path/to/a/troupe/checkout (with src/main.ts)');
  }
  trees.push({ label, dir: resolve(dir) });
}
const cfg = {
  runs: intArg('runs', 1),
  settleMs: intArg('settle-ms', 0),
  idleWindowMs: intArg('idle-window-ms', 100),
  backends: args.backends.split(',').map((s) => s.trim()).filter(Boolean) as Backend[],
  databaseUrl: args['database-url'],
};
if (cfg.backends.length === 0 || cfg.backends.some((b) => !(BACKENDS as readonly string[]).includes(b))) {
  throw new Error(`--backends: pick from ${BACKENDS.join(', ')}`);
}

const sumRss = (pids: number[]) => pids.reduce((sum, p) => sum + (processMemory(p)?.rss || 0), 0);
const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;

/** One start: time to listening, peaks, idle RSS, then a graceful stop. */
async function measureStart(dir: string, settings: Record<string, string>) {
  const t0 = performance.now();
  let [treePeak, processes, pid] = [0, 1, 0];
  const sample = () => {
    const tree = pid ? processTree(pid) : [];
    processes = Math.max(processes, tree.length);
    treePeak = Math.max(treePeak, sumRss(tree));
  };
  const sampler = setInterval(sample, 50);
  const onSpawn = (p: number) => (pid = p);
  const troupe = await startTroupe({ cwd: dir, settings, key: null, readyTimeoutMs: 120_000, onSpawn }).catch((err: unknown) => {
    clearInterval(sampler);
    throw err;
  });
  try {
    const startupMs = Math.round(performance.now() - t0);
    await sleep(cfg.settleMs);
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(`${troupe.base}${path}`, { signal: AbortSignal.timeout(10_000) });
      if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${(await res.text()).slice(0, 200)}`);
      await res.arrayBuffer();
    }
    const idle: number[] = [];
    for (const end = performance.now() + cfg.idleWindowMs; performance.now() < end; await sleep(100)) idle.push(sumRss(processTree(pid)));
    sample();
    const mem = processMemory(pid);
    if (!mem) throw new Error('troupe exited while measured');
    return { startupMs, peakMb: mb(mem.peakRss), treePeakMb: mb(treePeak), idleRssMb: mb(median(idle)), processes, threads: mem.threads };
  } finally {
    clearInterval(sampler);
    await troupe.stop(15_000);
  }
}

/** Starts once with the module hook and lists which NOT_AT_START packages were resolved. */
async function modulesAtStart(dir: string, backend: Backend): Promise<string[]> {
  const storage = await freshStore(backend, cfg.databaseUrl);
  const logFile = join(tmpdir(), `troupe-bench-modules-${randomBytes(4).toString('hex')}.log`);
  try {
    const settings = { ...storage.env, BENCH_MODULE_LOG: logFile };
    const troupe = await startTroupe({ cwd: dir, key: null, settings, nodeArgs: ['--import', MODULE_HOOK], readyTimeoutMs: 120_000 });
    await sleep(1_000);
    await troupe.stop(15_000);
    const urls = (await readFile(logFile, 'utf8')).split('\n');
    return NOT_AT_START.filter((name) => urls.some((url) => url.includes(`/node_modules/${name}/`)));
  } finally {
    await storage.dispose();
    await rm(logFile, { force: true });
  }
}

type Result = Awaited<ReturnType<typeof measureStart>> & { tree: string; backend: Backend; start: (typeof STARTS)[number]; run: number };
type Stat = { median: number; min: number; max: number };
const stat = (v: number[]): Stat => ({ median: median(v), min: Math.min(...v), max: Math.max(...v) });
const cell = (s: Stat, digits = 0) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;

runBench('bench:memory', 60 * 60_000, async ({ stamp }) => {
  const host = { node: process.version, nproc: availableParallelism(), cpuModel: cpus()[0]?.model ?? 'unknown',
    totalMemMb: Math.round(totalmem() / MB) };
  const checkouts = trees.map((t) => t.label).join(' vs ');
  log(`${cfg.runs} run(s) x ${cfg.backends.join(', ')} x ${checkouts}, settle ${cfg.settleMs} ms; ${host.nproc} CPUs, node ${host.node}`);
  const results: Result[] = [];
  for (const backend of cfg.backends) {
    for (let run = 1; run <= cfg.runs; run++) {
      for (const tree of run % 2 === 1 ? trees : [...trees].reverse()) {
        const storage = await freshStore(backend, cfg.databaseUrl);
        try {
          for (const start of STARTS) {
            const r = { tree: tree.label, backend, start, run, ...(await measureStart(tree.dir, storage.env)) };
            log(`${tree.label} ${backend} ${start} start, run ${run}: listening after ${r.startupMs} ms, ` +
              `peak ${r.peakMb} MB (tree ${r.treePeakMb}), idle ${r.idleRssMb} MB`);
            results.push(r);
          }
        } finally {
          await storage.dispose();
        }
      }
    }
  }
  const modules: Record<string, Record<string, string[]>> = {};
  for (const tree of trees) {
    for (const backend of cfg.backends) (modules[tree.label] ??= {})[backend] = await modulesAtStart(tree.dir, backend);
  }
  const summary = cfg.backends.flatMap((backend) => STARTS.flatMap((start) => trees.map(({ label }) => {
    const mine = results.filter((r) => r.tree === label && r.backend === backend && r.start === start);
    const of = (key: 'startupMs' | 'peakMb' | 'treePeakMb' | 'idleRssMb' | 'threads') => stat(mine.map((r) => r[key]));
    const processes = Math.max(...mine.map((r) => r.processes));
    return {
      tree: label, backend, start, runs: mine.length, processes, startupMs: of('startupMs'), peakMb: of('peakMb'),
      treePeakMb: of('treePeakMb'), idleRssMb: of('idleRssMb'), threads: of('threads'),
    };
  })));
  const ratio = (s: (typeof summary)[number], key: 'peakMb' | 'idleRssMb') => {
    const base = summary.find((o) => o.tree !== 'current' && o.backend === s.backend && o.start === s.start);
    return s.tree === 'current' && base ? ` ×${(s[key].median / base[key].median).toFixed(2)}` : '';
  };
  const table = markdownTable(
    ['checkout', 'backend', 'start', 'runs', 'to listening (ms)', 'peak, VmHWM (MB)', 'peak of tree, sampled (MB)', 'processes',
      'idle RSS (MB)', 'threads'],
    summary.map((s) => [s.tree, s.backend, s.start, s.runs, cell(s.startupMs), `${cell(s.peakMb)}${ratio(s, 'peakMb')}`,
      cell(s.treePeakMb), s.processes, `${cell(s.idleRssMb)}${ratio(s, 'idleRssMb')}`, cell(s.threads)]),
    'lllrrrrrrr',
  );
  const listed = (label: string) => cfg.backends.map((b) => `${b} ${modules[label]?.[b]?.join(', ') || 'none'}`).join('; ');
  const loaded = trees.map(({ label }) => `${label}: ${listed(label)}`).join('. ');
  const markdown = `${table}\n\nMedian (min–max) of ${cfg.runs} run(s); 'first' starts on an empty store (PGlite runs initdb), ` +
    `'restart' on the store the first start left. Idle RSS = median over ${cfg.idleWindowMs} ms after ${cfg.settleMs} ms settle + ` +
    'GET /healthz, /readyz; ×: current / ' +
    `${trees[1]?.label ?? 'baseline'}. Parser, OCR and voice packages loaded at start: ${loaded}. ${host.nproc} CPUs (${host.cpuModel}), ` +
    `${host.totalMemMb} MB RAM, node ${host.node}.`;
  process.stdout.write(`\n${markdown}\n`);
  const config = { ...cfg, databaseUrl: redactUrl(cfg.databaseUrl), trees };
  const json = { benchmark: 'memory', stamp, config, machine: host, summary, modules, results };
  const paths = await writeResults('memory', stamp, json, markdown);
  log(`wrote ${paths.json}`);
});
