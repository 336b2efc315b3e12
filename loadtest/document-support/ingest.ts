/**
 * Part (b) of the documents benchmark: one large file ingested end to end (multipart upload, queue,
 * parse in the worker pool, chunk, index) while the main thread's event-loop delay is recorded, on
 * a fresh store of each backend; `process` measures inside a Troupe child (probe.ts) with GET /healthz
 * back to back from outside, `in-process` runs startServer() here. curl sends the upload in both
 * modes, so sending 50 MB never runs on the loop being measured; the status is polled every 200 ms.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { startServer } from '../../src/server.ts';
import { delay, execFileAsync, type Log } from '../support/children.ts';
import { LoopMonitor, type LoopReport } from '../support/probe.ts';
import { summarize } from '../support/report.ts';
import { callJson, createCharacter, freshStore, newBootstrapKey, startTroupe } from '../support/troupe.ts';

export type Backend = 'postgres' | 'pglite';
export type Mode = 'process' | 'in-process';
export type IngestFile = { id: string; name: string; mimeType: string; path: string; bytes: number };
/** Per run: upload and processing time (202 to `ready`), the loop delay idle and during it, GET /healthz latency (process mode). */
export type IngestResult = Awaited<ReturnType<typeof measureIngest>>;

interface Target {
  url: string;
  key: string;
  /** Starts a new window of the main thread's loop delay; returns the window that ended. */
  window(): Promise<LoopReport>;
  stop(): Promise<void>;
}

/** Back-to-back GET /healthz until stopped; latencies in ms. */
function probeHealthz(url: string): { stop: () => Promise<number[]> } {
  let stopped = false;
  const latencies: number[] = [];
  const loop = (async () => {
    while (!stopped) {
      const t0 = performance.now();
      // A connection the server closed while frozen fails one probe (counted until it failed), not the run.
      await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(60_000) }).then((res) => res.arrayBuffer(), () => null);
      latencies.push(performance.now() - t0);
    }
  })();
  return { stop: () => ((stopped = true), loop.then(() => latencies)) };
}

async function startTarget(mode: Mode, settings: Record<string, string>, key: string, resolutionMs: number): Promise<Target> {
  if (mode === 'process') {
    const probe = { loopResolutionMs: resolutionMs };
    const troupe = await startTroupe({ name: 'troupe-documents', engine: 'node', key, settings, probe, readyTimeoutMs: 120_000 });
    const window = async () => (await troupe.probe(30_000)).loop as LoopReport;
    return { url: troupe.base, key, window, stop: () => troupe.stop(15_000).then(() => {}) };
  }
  const env = { PORT: '0', HOST: '127.0.0.1', HTTP_ENGINE: 'node', TROUPE_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn', ...settings };
  const config = loadConfig(env);
  const server = await startServer(config, createLogger(config.logLevel, new Writable({ write: (_chunk, _encoding, done) => done() })));
  const monitor = new LoopMonitor(resolutionMs);
  return { url: server.url, key, window: async () => monitor.window(), stop: () => (monitor.stop(), server.stop()) };
}

async function curlUpload(target: Target, characterId: string, file: IngestFile): Promise<{ id: string }> {
  const form = `file=@${file.path};type=${file.mimeType};filename=${file.name}`;
  const args = ['-sS', '--max-time', '600', '-H', `authorization: Bearer ${target.key}`, '-F', form, '-w', '\n%{http_code}'];
  const { stdout } = await execFileAsync('curl', [...args, `${target.url}/characters/${characterId}/documents`],
    { maxBuffer: 16 * 1024 * 1024 });
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
  resolutionMs: number;
  timeoutMs: number;
  log: Log;
}

export async function measureIngest(o: IngestOptions) {
  const store = await freshStore(o.backend, o.databaseUrl);
  const label = `ingest ${o.file.id} ${o.backend} ${o.mode} #${o.run}`;
  let target: Target | null = null;
  try {
    const t = (target = await startTarget(o.mode, store.env, newBootstrapKey(), o.resolutionMs));
    const api = { base: t.url, auth: `Bearer ${t.key}` };
    const characterId = await createCharacter(api, 'Archivist', 'Answers from the documents.');
    const probing = o.mode === 'process';
    // Two idle seconds first: the floor each number should be read against.
    await t.window();
    const idleProbe = probing ? probeHealthz(t.url) : null;
    await delay(2_000);
    const idleLatencies = (await idleProbe?.stop()) ?? [];
    const idle = await t.window();
    const busyProbe = probing ? probeHealthz(t.url) : null;
    const t0 = performance.now();
    const uploaded = await curlUpload(t, characterId, o.file);
    const uploadMs = performance.now() - t0;
    const deadline = Date.now() + o.timeoutMs;
    let doc: { status: string; chunkCount: number; errorMessage: string | null };
    for (;;) {
      doc = await callJson(api, 'GET', `/characters/${characterId}/documents/${uploaded.id}`, undefined, 200);
      if (doc.status === 'ready' || doc.status === 'failed') break;
      if (Date.now() > deadline) throw new Error(`${label}: still ${doc.status} after ${o.timeoutMs} ms`);
      await delay(200);
    }
    const processMs = performance.now() - t0 - uploadMs;
    const busyLatencies = (await busyProbe?.stop()) ?? [];
    const loop = await t.window();
    if (doc.status !== 'ready') o.log(`${label}: FAILED: ${doc.errorMessage}`);
    o.log(`${label}: upload ${uploadMs.toFixed(0)} ms, processing ${processMs.toFixed(0)} ms, ${doc.chunkCount} chunks, ` +
      `loop p99 ${loop.p99} ms max ${loop.max} ms`);
    const { backend, mode, run } = o;
    const healthz = probing ? summarize(busyLatencies) : null;
    const healthzIdle = probing ? summarize(idleLatencies) : null;
    const { status, chunkCount } = doc;
    return { file: o.file.id, backend, mode, run, status, chunkCount, uploadMs, processMs, idle, loop, healthz, healthzIdle };
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
