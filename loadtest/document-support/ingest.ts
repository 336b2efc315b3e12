/**
 * Part (b) of the documents benchmark: one large file ingested end to end (multipart upload over
 * HTTP, queue, parse in the worker pool, chunk, index) while the main thread's event-loop delay
 * is recorded, on a fresh database of each backend:
 *   process     `node --import loop-probe.ts src/main.ts` as a child (launched like the other
 *               benches' Troupe children); the preloaded probe measures inside it, and a client
 *               sends GET /healthz back to back the whole time (a responsiveness proxy seen from
 *               outside).
 *   in-process  startServer() in this process (as test/support/server.ts does), monitored here.
 * The upload is sent by curl, a separate process, in both modes, so sending 50 MB never runs on
 * the loop being measured; the status is polled with GET every 200 ms until `ready`.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { startServer } from '../../src/server.ts';
import { createTempDatabase } from '../../test/support/databases.ts';
import { delay, launch } from '../support/children.ts';
import { summarize, type Summary } from '../support/stats.ts';
import { troupeEnv } from '../support/troupe-env.ts';
import { LoopMonitor, type LoopReport } from './loop-monitor.ts';

const execFileAsync = promisify(execFile);

export type Backend = 'postgres' | 'pglite';
export type Mode = 'process' | 'in-process';

export interface IngestFile {
  id: string;
  name: string;
  mimeType: string;
  path: string;
  bytes: number;
}

export interface IngestResult {
  file: string;
  backend: Backend;
  mode: Mode;
  run: number;
  status: string;
  chunkCount: number;
  uploadMs: number;
  /** From the upload's 202 to `ready`. */
  processMs: number;
  idle: LoopReport;
  loop: LoopReport;
  /** GET /healthz latency during the ingestion (process mode only). */
  healthz: Summary | null;
  healthzIdle: Summary | null;
}

interface Target {
  url: string;
  key: string;
  /** Starts a new window of the main thread's loop delay; returns the window that ended. */
  window(): Promise<LoopReport>;
  stop(): Promise<void>;
}

async function api<T>(url: string, key: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Back-to-back GET /healthz until `stop` resolves; latencies in ms. */
async function probeHealthz(url: string, stop: Promise<void>): Promise<number[]> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  const latencies: number[] = [];
  while (!stopped) {
    const t0 = performance.now();
    // A connection the server closed while frozen fails one probe (counted until it failed), not the run.
    await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(60_000) }).then((res) => res.arrayBuffer(), () => null);
    latencies.push(performance.now() - t0);
  }
  return latencies;
}

async function storage(backend: Backend, baseUrl: string): Promise<{ env: Record<string, string>; dispose: () => Promise<void> }> {
  if (backend === 'postgres') {
    const db = await createTempDatabase(baseUrl);
    return { env: { DATABASE_URL: db.url }, dispose: db.drop };
  }
  const dir = await mkdtemp(join(tmpdir(), 'troupe-doc-bench-'));
  return { env: { TROUPE_DATA_DIR: dir }, dispose: () => rm(dir, { recursive: true, force: true }) };
}

async function startProcess(env: Record<string, string>, key: string, root: string, resolutionMs: number): Promise<Target> {
  const probeFile = join(tmpdir(), `troupe-doc-bench-loop-${process.pid}-${randomBytes(4).toString('hex')}.json`);
  const probe = pathToFileURL(join(root, 'loadtest/document-support/loop-probe.ts')).href;
  const child = await launch({
    name: 'troupe-documents',
    command: process.execPath,
    args: ['--import', probe, 'src/main.ts'],
    env: troupeEnv({
      ...env,
      PORT: '0',
      HOST: '127.0.0.1',
      HTTP_ENGINE: 'node',
      TROUPE_BOOTSTRAP_KEY: key,
      LOG_LEVEL: 'info',
      BENCH_LOOP_PROBE_FILE: probeFile,
      BENCH_LOOP_RESOLUTION_MS: String(resolutionMs),
    }),
    cwd: root,
    readyMsg: 'troupe listening',
    readyTimeoutMs: 120_000,
  });
  let seq = 0;
  return {
    url: `http://127.0.0.1:${child.port}`,
    key,
    async window() {
      process.kill(child.pid, 'SIGUSR2');
      const deadline = Date.now() + 30_000;
      for (;;) {
        await delay(20);
        const report = await readFile(probeFile, 'utf8').then((t) => JSON.parse(t) as LoopReport & { seq: number }, () => null);
        if (report && report.seq > seq) {
          seq = report.seq;
          const { seq: _seq, ...rest } = report;
          return rest;
        }
        if (Date.now() > deadline) throw new Error(`the loop probe did not answer\n${child.tail()}`);
      }
    },
    async stop() {
      await child.stop(15_000);
      await rm(probeFile, { force: true });
    },
  };
}

async function startInProcess(env: Record<string, string>, key: string, resolutionMs: number): Promise<Target> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', HTTP_ENGINE: 'node', TROUPE_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn', ...env });
  const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
  const server = await startServer(config, createLogger(config.logLevel, sink));
  const monitor = new LoopMonitor(resolutionMs);
  return {
    url: server.url,
    key,
    async window() {
      const report = monitor.report();
      monitor.reset();
      return report;
    },
    async stop() {
      monitor.stop();
      await server.stop();
    },
  };
}

async function curlUpload(target: Target, characterId: string, file: IngestFile): Promise<{ id: string }> {
  const { stdout } = await execFileAsync('curl', [
    '-sS', '--max-time', '600',
    '-H', `authorization: Bearer ${target.key}`,
    '-F', `file=@${file.path};type=${file.mimeType};filename=${file.name}`,
    '-w', '\n%{http_code}',
    `${target.url}/characters/${characterId}/documents`,
  ], { maxBuffer: 16 * 1024 * 1024 });
  const newline = stdout.lastIndexOf('\n');
  const status = stdout.slice(newline + 1).trim();
  if (status !== '202') throw new Error(`upload of ${file.id}: HTTP ${status}: ${stdout.slice(0, 300)}`);
  return JSON.parse(stdout.slice(0, newline)) as { id: string };
}

export interface IngestOptions {
  backend: Backend;
  mode: Mode;
  file: IngestFile;
  run: number;
  databaseUrl: string;
  root: string;
  resolutionMs: number;
  timeoutMs: number;
  log: (line: string) => void;
}

export async function measureIngest(o: IngestOptions): Promise<IngestResult> {
  const store = await storage(o.backend, o.databaseUrl);
  const key = `sk-troupe-docbench${randomBytes(12).toString('base64url')}`;
  const label = `ingest ${o.file.id} ${o.backend} ${o.mode} #${o.run}`;
  let target: Target | null = null;
  try {
    target = o.mode === 'process' ? await startProcess(store.env, key, o.root, o.resolutionMs) : await startInProcess(store.env, key, o.resolutionMs);
    const t = target;
    const character = await api<{ id: string }>(t.url, key, 'POST', '/characters', { name: 'Archivist', description: 'Answers from the documents.' });
    const probing = o.mode === 'process';

    // Two idle seconds first: the floor each number should be read against.
    await t.window();
    let endIdle = () => {};
    const idleProbe = probing ? probeHealthz(t.url, new Promise<void>((r) => (endIdle = r))) : Promise.resolve([]);
    await delay(2_000);
    endIdle();
    const idleLatencies = await idleProbe;
    const idle = await t.window();

    let endBusy = () => {};
    const busyProbe = probing ? probeHealthz(t.url, new Promise<void>((r) => (endBusy = r))) : Promise.resolve([]);
    const t0 = performance.now();
    const uploaded = await curlUpload(t, character.id, o.file);
    const uploadMs = performance.now() - t0;
    const deadline = Date.now() + o.timeoutMs;
    let doc: { status: string; chunkCount: number; errorMessage: string | null };
    for (;;) {
      doc = await api(t.url, key, 'GET', `/characters/${character.id}/documents/${uploaded.id}`);
      if (doc.status === 'ready' || doc.status === 'failed') break;
      if (Date.now() > deadline) throw new Error(`${label}: still ${doc.status} after ${o.timeoutMs} ms`);
      await delay(200);
    }
    const processMs = performance.now() - t0 - uploadMs;
    endBusy();
    const busyLatencies = await busyProbe;
    const loop = await t.window();
    if (doc.status !== 'ready') o.log(`${label}: FAILED: ${doc.errorMessage}`);
    o.log(`${label}: upload ${uploadMs.toFixed(0)} ms, processing ${processMs.toFixed(0)} ms, ${doc.chunkCount} chunks, loop p99 ${loop.p99} ms max ${loop.max} ms`);
    return {
      file: o.file.id,
      backend: o.backend,
      mode: o.mode,
      run: o.run,
      status: doc.status,
      chunkCount: doc.chunkCount,
      uploadMs,
      processMs,
      idle,
      loop,
      healthz: probing ? summarize(busyLatencies) : null,
      healthzIdle: probing ? summarize(idleLatencies) : null,
    };
  } finally {
    await target?.stop().catch((err: unknown) => o.log(`${label}: stopping failed: ${String(err)}`));
    await store.dispose().catch((err: unknown) => o.log(`${label}: cleanup failed: ${String(err)}`));
  }
}

/** Writes a generated file where curl can read it. */
export async function stageFile(dir: string, id: string, name: string, mimeType: string, bytes: Uint8Array): Promise<IngestFile> {
  const path = join(dir, name);
  await writeFile(path, bytes);
  return { id, name, mimeType, path, bytes: bytes.byteLength };
}
