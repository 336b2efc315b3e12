/**
 * Troupe's memory at rest (Linux, from /proc/<pid>/status): start-up time, start-up peak (VmHWM)
 * and idle RSS of `node src/main.ts` on PGlite (fresh temp dir) and PostgreSQL (fresh temp database).
 *   node loadtest/memory.ts [--runs 3] [--settle-ms 10000] [--idle-window-ms 2000]
 *     [--backends pglite,postgres] [--database-url postgres://postgres@127.0.0.1:5432/test]
 * Per run: clean env, VmRSS sampled every 100 ms until `troupe listening`, then --settle-ms,
 * GET /healthz and /readyz, and idle RSS = median VmRSS over --idle-window-ms.
 * Prints a Markdown table and writes loadtest/results/memory-<stamp>.json.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { processMemory } from './conversation-support/proc.ts';
import { spawnTracked, tailKeeper, type Tracked } from './support/children.ts';
import { gitState, machine, startRun } from './support/run.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS_DIR = join(ROOT, 'loadtest', 'results');
const BACKENDS = ['pglite', 'postgres'] as const;
type Backend = (typeof BACKENDS)[number];
const MB = 2 ** 20;
const READY_TIMEOUT_MS = 120_000;
const log = (line: string) => process.stderr.write(`[memory] ${line}\n`);

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    'settle-ms': { type: 'string', default: '10000' },
    'idle-window-ms': { type: 'string', default: '2000' },
    backends: { type: 'string', default: BACKENDS.join(',') },
    'database-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/test' },
  },
});
const intArg = (name: 'runs' | 'settle-ms' | 'idle-window-ms', min: number): number => {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer >= ${min}, got '${args[name]}'`);
  return value;
};
const cfg = {
  runs: intArg('runs', 1),
  settleMs: intArg('settle-ms', 0),
  idleWindowMs: intArg('idle-window-ms', 100),
  backends: args.backends.split(',').map((s) => s.trim()).filter(Boolean) as Backend[],
  databaseUrl: args['database-url'],
};
const unknown = cfg.backends.filter((b) => !(BACKENDS as readonly string[]).includes(b));
if (unknown.length > 0 || cfg.backends.length === 0) throw new Error(`--backends: pick from ${BACKENDS.join(', ')}`);

/** Synchronous last-resort cleanups for exits that skip `finally` (Ctrl-C, the time budget). */
const leftovers = new Map<string, () => void>();

async function adminQuery(statement: string): Promise<void> {
  const sql = postgres(cfg.databaseUrl, { max: 1, onnotice: () => {} });
  await sql.unsafe(statement).finally(() => sql.end());
}

/** A fresh, empty store for one run: the child's storage variable and how to remove it. */
async function openStorage(backend: Backend): Promise<{ env: Record<string, string>; dispose: () => Promise<void> }> {
  if (backend === 'pglite') {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-memory-'));
    leftovers.set(dir, () => rmSync(dir, { recursive: true, force: true }));
    return { env: { TROUPE_DATA_DIR: dir }, dispose: async () => { await rm(dir, { recursive: true, force: true }); leftovers.delete(dir); } };
  }
  const name = `troupe_bench_${randomBytes(6).toString('hex')}`;
  const drop = `drop database if exists ${name} with (force)`;
  await adminQuery(`create database ${name}`);
  const script = `import postgres from 'postgres'; const sql = postgres(${JSON.stringify(cfg.databaseUrl)}, { max: 1, onnotice: () => {} }); await sql.unsafe(${JSON.stringify(drop)}); await sql.end();`;
  leftovers.set(name, () => execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: 'ignore', timeout: 20_000 }));
  const url = new URL(cfg.databaseUrl);
  url.pathname = `/${name}`;
  return { env: { DATABASE_URL: url.toString() }, dispose: async () => { await adminQuery(drop); leftovers.delete(name); } };
}

/**
 * Resolves with the parsed `troupe listening` line. children.ts's launch() does this too, but only
 * hands out the pid once ready, and the start-up has to be sampled; so spawnTracked() plus this.
 */
function waitForListening(t: Tracked, remember: (text: string) => void, tail: () => string): Promise<Record<string, unknown> & { port: number }> {
  return new Promise((resolve, reject) => {
    let pending = '';
    let done = false;
    const fail = (why: string) => {
      clearTimeout(timer);
      if (!done) reject(new Error(`troupe ${why}\n--- last output ---\n${tail()}`));
      done = true;
    };
    const timer = setTimeout(() => fail(`printed no "troupe listening" line within ${READY_TIMEOUT_MS} ms`), READY_TIMEOUT_MS);
    void t.exited.then((e) => fail(`exited before listening (code ${e.code}, signal ${e.signal})`));
    t.child.stderr.setEncoding('utf8').on('data', remember);
    t.child.stdout.setEncoding('utf8').on('data', (text: string) => {
      remember(text);
      if (done) return;
      const lines = (pending + text).split('\n');
      pending = lines.pop() ?? '';
      const line = lines.find((l) => l.includes('"msg":"troupe listening"'));
      if (line === undefined) return;
      const r = JSON.parse(line) as Record<string, unknown>;
      if (typeof r.port !== 'number') return fail(`logged a listening line without a port: ${line}`);
      done = true;
      clearTimeout(timer);
      resolve({ ...r, port: r.port });
    });
  });
}

function memoryOf(pid: number): { rss: number; peakRss: number } {
  const mem = processMemory(pid);
  if (!mem) throw new Error(`cannot read /proc/${pid}/status`);
  return mem;
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? Number.NaN) : ((s[mid - 1] ?? Number.NaN) + (s[mid] ?? Number.NaN)) / 2;
}
const redact = (url: string) => url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;

async function measureOnce(backend: Backend, run: number) {
  const storage = await openStorage(backend);
  try {
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...storage.env };
    const t0 = performance.now();
    const tracked = spawnTracked({ command: process.execPath, args: ['src/main.ts'], env, cwd: ROOT });
    try {
      const pid = tracked.child.pid;
      if (pid === undefined) throw new Error('spawn gave no pid');
      const { remember, tail } = tailKeeper();
      const startRss: number[] = [];
      const sampler = setInterval(() => startRss.push(processMemory(pid)?.rss ?? Number.NaN), 100);
      const ready = await waitForListening(tracked, remember, tail).finally(() => clearInterval(sampler));
      const startupMs = performance.now() - t0;
      const atListening = memoryOf(pid);
      await sleep(cfg.settleMs); // ref'd, unlike children.ts's delay(): the loop must not run dry if Troupe dies
      for (const path of ['/healthz', '/readyz']) {
        const res = await fetch(`http://127.0.0.1:${ready.port}${path}`, { signal: AbortSignal.timeout(10_000) });
        const body = await res.text();
        if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${body.slice(0, 200)}`);
      }
      const idle: number[] = [];
      for (const end = performance.now() + cfg.idleWindowMs; performance.now() < end; await sleep(100)) idle.push(memoryOf(pid).rss);
      const atEnd = memoryOf(pid);
      const exit = await tracked.stop(15_000);
      const result = {
        backend, run, engine: ready.engine, database: ready.database, startupMs: Math.round(startupMs),
        startupPeakMb: mb(atListening.peakRss), rssAtListeningMb: mb(atListening.rss), idleRssMb: mb(median(idle)),
        peakByEndMb: mb(atEnd.peakRss), idleSamples: idle.length, startRssMb: startRss.filter(Number.isFinite).map(mb), exit,
      };
      log(`${backend} run ${run}: listening after ${result.startupMs} ms, peak ${result.startupPeakMb} MB, idle ${result.idleRssMb} MB, exit code ${exit.code}`);
      return result;
    } finally {
      if (tracked.exitInfo() === null) {
        tracked.child.kill('SIGKILL');
        await tracked.exited;
      }
    }
  } finally {
    await storage.dispose();
  }
}

const perRunMs = cfg.settleMs + cfg.idleWindowMs + READY_TIMEOUT_MS + 30_000;
const { stamp, disarm } = startRun('bench:memory', 60_000 + cfg.runs * cfg.backends.length * perRunMs);
process.on('exit', () => leftovers.forEach((cleanup) => {
  try { cleanup(); } catch { /* best effort on the way out */ }
}));
const host = { ...machine(), nproc: availableParallelism(), totalMemMb: Math.round(totalmem() / MB) };
log(`${cfg.runs} run(s) per backend (${cfg.backends.join(', ')}), settle ${cfg.settleMs} ms; ${host.nproc} CPUs, ${host.totalMemMb} MB RAM, node ${host.node}`);
const runs: Awaited<ReturnType<typeof measureOnce>>[] = [];
for (const backend of cfg.backends) for (let i = 1; i <= cfg.runs; i++) runs.push(await measureOnce(backend, i));
disarm();

const stat = (values: number[]) => ({ median: median(values), min: Math.min(...values), max: Math.max(...values) });
const summary = cfg.backends.map((backend) => {
  const mine = runs.filter((r) => r.backend === backend);
  const of = (key: 'startupMs' | 'startupPeakMb' | 'idleRssMb' | 'peakByEndMb') => stat(mine.map((r) => r[key]));
  return { backend, runs: mine.length, engine: mine[0]?.engine, startupMs: of('startupMs'), startupPeakMb: of('startupPeakMb'), idleRssMb: of('idleRssMb'), peakByEndMb: of('peakByEndMb') };
});
const cell = (s: { median: number; min: number; max: number }, digits: number) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
const table = [
  '| backend | runs | start-up to listening (ms) | start-up peak, VmHWM (MB) | idle RSS (MB) | VmHWM at end (MB) |',
  '| --- | ---: | ---: | ---: | ---: | ---: |',
  ...summary.map((s) => `| ${s.backend} (${String(s.engine)}) | ${s.runs} | ${cell(s.startupMs, 0)} | ${cell(s.startupPeakMb, 1)} | ${cell(s.idleRssMb, 1)} | ${cell(s.peakByEndMb, 1)} |`),
].join('\n');
process.stdout.write(`\n${table}\n\nMedian (min–max) of ${cfg.runs} run(s); idle RSS = median VmRSS over ${cfg.idleWindowMs} ms after ${cfg.settleMs} ms settle + GET /healthz, /readyz. ${host.nproc} CPUs (${host.cpuModel}), ${host.totalMemMb} MB RAM, node ${host.node}.\n`);

await mkdir(RESULTS_DIR, { recursive: true });
const file = join(RESULTS_DIR, `memory-${stamp}.json`);
await writeFile(file, `${JSON.stringify({ benchmark: 'memory', stamp, config: { ...cfg, databaseUrl: redact(cfg.databaseUrl) }, machine: host, git: await gitState(ROOT), summary, runs }, null, 2)}\n`);
log(`wrote ${file}`);
