/**
 * Troupe's memory at rest (Linux /proc): start-up time, start-up peak and idle RSS of `node src/main.ts`
 * on PGlite and PostgreSQL, for a first start on an empty store and a restart on the store it left.
 *   node loadtest/memory.ts [--runs 3] [--settle-ms 10000] [--idle-window-ms 2000] [--backends pglite,postgres]
 *     [--database-url postgres://postgres@127.0.0.1:5432/test] [--compare before=/path/to/other/checkout]
 * --compare measures another checkout (e.g. `git archive HEAD` unpacked, node_modules linked) in the
 * same run, interleaved run by run, so before and after share the machine's noise.
 * Peak: VmHWM of the server process, and the sampled sum over its process tree (children started at
 * start would count; the table says how many processes there were). Idle RSS: median VmRSS over
 * --idle-window-ms after --settle-ms and GET /healthz, /readyz. Each checkout also gets one start with a
 * module-logging hook, to list the packages that must not load at start (document parsers, OCR, voice).
 * Prints a Markdown table and writes loadtest/results/memory-<stamp>.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BACKENDS = ['pglite', 'postgres'] as const;
type Backend = (typeof BACKENDS)[number];
const STARTS = ['first', 'restart'] as const;
const MB = 2 ** 20;
const READY_TIMEOUT_MS = 120_000;
/** Packages that load only in the parser worker (or the voice worker), never in the server at start. */
const NOT_AT_START = ['pdf-parse', 'pdfjs-dist', 'mammoth', 'htmlparser2', 'tesseract.js', 'tesseract.js-core', '@tesseract.js-data', 'jszip', '@livekit/agents', '@livekit/rtc-node', 'onnxruntime-node'];
const MODULE_HOOK = `data:text/javascript,${encodeURIComponent("import{registerHooks}from'node:module';import{appendFileSync}from'node:fs';const f=process.env.BENCH_MODULE_LOG;registerHooks({resolve(s,c,n){const r=n(s,c);appendFileSync(f,r.url+'\\n');return r}});")}`;
const log = (line: string) => process.stderr.write(`[memory] ${line}\n`);
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
  if (!Number.isInteger(Number(args[name])) || Number(args[name]) < min) throw new Error(`--${name} must be an integer >= ${min}, got '${args[name]}'`);
  return Number(args[name]);
};
const trees: { label: string; dir: string }[] = [{ label: 'current', dir: ROOT }];
if (args.compare) {
  const [label, dir] = args.compare.split('=');
  if (!label || !dir || !existsSync(join(dir, 'src', 'main.ts'))) throw new Error('--compare takes label=/path/to/a/troupe/checkout (with src/main.ts)');
  trees.push({ label, dir: resolve(dir) });
}
const cfg = {
  runs: intArg('runs', 1),
  settleMs: intArg('settle-ms', 0),
  idleWindowMs: intArg('idle-window-ms', 100),
  backends: args.backends.split(',').map((s) => s.trim()).filter(Boolean) as Backend[],
  databaseUrl: args['database-url'],
};
if (cfg.backends.length === 0 || cfg.backends.some((b) => !(BACKENDS as readonly string[]).includes(b))) throw new Error(`--backends: pick from ${BACKENDS.join(', ')}`);

/** Children and PGlite stores still to remove, whatever way this process ends. */
const live = new Set<ChildProcess>();
const dirs = new Set<string>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

async function adminQuery(statement: string): Promise<void> {
  const sql = postgres(cfg.databaseUrl, { max: 1, onnotice: () => {} });
  await sql.unsafe(statement).finally(() => sql.end());
}

/** A fresh, empty store: the child's storage variable and how to remove it. */
async function openStorage(backend: Backend): Promise<{ env: Record<string, string>; dispose: () => Promise<void> }> {
  if (backend === 'pglite') {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-memory-'));
    dirs.add(dir);
    return { env: { TROUPE_DATA_DIR: dir }, dispose: () => rm(dir, { recursive: true, force: true }).then(() => void dirs.delete(dir)) };
  }
  const name = `troupe_bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(`create database ${name}`);
  const url = new URL(cfg.databaseUrl);
  url.pathname = `/${name}`;
  return { env: { DATABASE_URL: url.toString() }, dispose: () => adminQuery(`drop database if exists ${name} with (force)`) };
}

/** VmRSS and VmHWM (peak) in bytes from /proc/<pid>/status; null once the process is gone. */
function memoryOf(pid: number): { rss: number; peak: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN) * 1024;
    return { rss: kb('VmRSS'), peak: kb('VmHWM') };
  } catch { return null; } // gone
}

/** The process and its descendants (children of every thread, recursively). */
function processTree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) {
    const parent = all[i] as number;
    try {
      for (const task of readdirSync(`/proc/${parent}/task`)) {
        const children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8').trim();
        if (children) all.push(...children.split(/\s+/).map(Number));
      }
    } catch { /* gone meanwhile */ }
  }
  return all;
}
const sumRss = (pids: number[]) => pids.reduce((sum, p) => sum + (memoryOf(p)?.rss || 0), 0); // NaN: a zombie

/** Starts Troupe from `dir`, resolves with its pid and port once it logs `troupe listening`. */
function startTroupe(dir: string, env: Record<string, string>, execArgv: string[] = []) {
  const child = spawn(process.execPath, [...execArgv, 'src/main.ts'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const exited = new Promise<void>((done) => child.once('exit', () => (live.delete(child), done())));
  let tail = '';
  const ready = new Promise<{ port: number }>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "troupe listening" within ${READY_TIMEOUT_MS} ms\n${tail}`)), READY_TIMEOUT_MS);
    void exited.then(() => reject(new Error(`troupe exited before listening (code ${child.exitCode})\n${tail}`)));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (tail = (tail + text).slice(-4000)));
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      tail = (tail + text).slice(-4000);
      const line = /\{[^\n]*"msg":"troupe listening"[^\n]*\}/.exec(tail)?.[0];
      if (!line) return;
      clearTimeout(timer);
      resolveReady({ port: (JSON.parse(line) as { port: number }).port });
    });
  });
  const stop = async () => {
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.kill('SIGTERM');
    await exited.finally(() => clearTimeout(killer));
  };
  return { pid: child.pid ?? -1, ready, stop };
}

const median = (v: readonly number[]) => {
  const s = [...v].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? Number.NaN) + (s[m] ?? Number.NaN)) / 2;
};
const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;
// A clean environment: nothing from the developer's shell leaks into the measured server.
const baseEnv = (storage: Record<string, string>) => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...storage });

/** One start: time to listening, peaks, idle RSS, then a graceful stop. */
async function measureStart(dir: string, env: Record<string, string>) {
  const t0 = performance.now();
  const troupe = startTroupe(dir, env);
  let treePeak = 0;
  let processes = 1;
  const sample = () => {
    const tree = processTree(troupe.pid);
    processes = Math.max(processes, tree.length);
    treePeak = Math.max(treePeak, sumRss(tree));
  };
  const sampler = setInterval(sample, 50);
  try {
    const { port } = await troupe.ready;
    const startupMs = Math.round(performance.now() - t0);
    await sleep(cfg.settleMs);
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
      if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${(await res.text()).slice(0, 200)}`);
      await res.arrayBuffer();
    }
    const idle: number[] = [];
    for (const end = performance.now() + cfg.idleWindowMs; performance.now() < end; await sleep(100)) idle.push(sumRss(processTree(troupe.pid)));
    sample();
    const mem = memoryOf(troupe.pid);
    if (!mem) throw new Error('troupe exited while measured');
    const threads = Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${troupe.pid}/status`, 'utf8'))?.[1]);
    return { startupMs, peakMb: mb(mem.peak), treePeakMb: mb(treePeak), idleRssMb: mb(median(idle)), processes, threads };
  } finally {
    clearInterval(sampler);
    await troupe.stop();
  }
}

/** Starts once with the module hook and lists which NOT_AT_START packages were resolved. */
async function modulesAtStart(dir: string, backend: Backend): Promise<string[]> {
  const storage = await openStorage(backend);
  const logFile = join(tmpdir(), `troupe-bench-modules-${randomBytes(4).toString('hex')}.log`);
  const troupe = startTroupe(dir, { ...baseEnv(storage.env), BENCH_MODULE_LOG: logFile }, ['--import', MODULE_HOOK]);
  try {
    await troupe.ready;
    await sleep(1_000);
    const urls = (await readFile(logFile, 'utf8')).split('\n');
    return NOT_AT_START.filter((name) => urls.some((url) => url.includes(`/node_modules/${name}/`)));
  } finally {
    await troupe.stop();
    await storage.dispose();
    await rm(logFile, { force: true });
  }
}

type Result = Awaited<ReturnType<typeof measureStart>> & { tree: string; backend: Backend; start: (typeof STARTS)[number]; run: number };
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const host = { node: process.version, nproc: availableParallelism(), cpuModel: cpus()[0]?.model ?? 'unknown', totalMemMb: Math.round(totalmem() / MB) };
log(`${cfg.runs} run(s) x ${cfg.backends.join(', ')} x ${trees.map((t) => t.label).join(' vs ')}, settle ${cfg.settleMs} ms; ${host.nproc} CPUs, node ${host.node}`);
const results: Result[] = [];
for (const backend of cfg.backends) {
  for (let run = 1; run <= cfg.runs; run++) {
    for (const tree of run % 2 === 1 ? trees : [...trees].reverse()) {
      const storage = await openStorage(backend);
      try {
        for (const start of STARTS) {
          const r = { tree: tree.label, backend, start, run, ...(await measureStart(tree.dir, baseEnv(storage.env))) };
          log(`${tree.label} ${backend} ${start} start, run ${run}: listening after ${r.startupMs} ms, peak ${r.peakMb} MB (tree ${r.treePeakMb}), idle ${r.idleRssMb} MB`);
          results.push(r);
        }
      } finally {
        await storage.dispose();
      }
    }
  }
}
const modules: Record<string, Record<string, string[]>> = {};
for (const tree of trees) for (const backend of cfg.backends) (modules[tree.label] ??= {})[backend] = await modulesAtStart(tree.dir, backend);

const stat = (v: number[]) => ({ median: median(v), min: Math.min(...v), max: Math.max(...v) });
const cell = (s: { median: number; min: number; max: number }, digits = 0) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
const summary = cfg.backends.flatMap((backend) => STARTS.flatMap((start) => trees.map(({ label }) => {
  const mine = results.filter((r) => r.tree === label && r.backend === backend && r.start === start);
  const of = (key: 'startupMs' | 'peakMb' | 'treePeakMb' | 'idleRssMb' | 'threads') => stat(mine.map((r) => r[key]));
  return { tree: label, backend, start, runs: mine.length, processes: Math.max(...mine.map((r) => r.processes)), startupMs: of('startupMs'), peakMb: of('peakMb'), treePeakMb: of('treePeakMb'), idleRssMb: of('idleRssMb'), threads: of('threads') };
})));
const ratio = (s: (typeof summary)[number], key: 'peakMb' | 'idleRssMb') => {
  const base = summary.find((o) => o.tree !== 'current' && o.backend === s.backend && o.start === s.start);
  return s.tree === 'current' && base ? ` ×${(s[key].median / base[key].median).toFixed(2)}` : '';
};
const table = [
  '| checkout | backend | start | runs | to listening (ms) | peak, VmHWM (MB) | peak of tree, sampled (MB) | processes | idle RSS (MB) | threads |',
  '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...summary.map((s) => `| ${s.tree} | ${s.backend} | ${s.start} | ${s.runs} | ${cell(s.startupMs)} | ${cell(s.peakMb)}${ratio(s, 'peakMb')} | ${cell(s.treePeakMb)} | ${s.processes} | ${cell(s.idleRssMb)}${ratio(s, 'idleRssMb')} | ${cell(s.threads)} |`),
].join('\n');
const loaded = trees.map(({ label }) => `${label}: ${cfg.backends.map((b) => `${b} ${modules[label]?.[b]?.join(', ') || 'none'}`).join('; ')}`).join('. ');
process.stdout.write(`\n${table}\n\nMedian (min–max) of ${cfg.runs} run(s); 'first' starts on an empty store (PGlite runs initdb), 'restart' on the store the first start left. Idle RSS = median over ${cfg.idleWindowMs} ms after ${cfg.settleMs} ms settle + GET /healthz, /readyz; ×: current / ${trees[1]?.label ?? 'baseline'}. Parser, OCR and voice packages loaded at start: ${loaded}. ${host.nproc} CPUs (${host.cpuModel}), ${host.totalMemMb} MB RAM, node ${host.node}.\n`);

await mkdir(join(ROOT, 'loadtest', 'results'), { recursive: true });
const file = join(ROOT, 'loadtest', 'results', `memory-${stamp}.json`);
const redacted = cfg.databaseUrl.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
await writeFile(file, `${JSON.stringify({ benchmark: 'memory', stamp, config: { ...cfg, databaseUrl: redacted, trees }, machine: host, summary, modules, results }, null, 2)}\n`);
log(`wrote ${file}`);
