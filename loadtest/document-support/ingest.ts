/**
 * Part (b) of the documents benchmark: one large file ingested end to end (multipart upload over
 * HTTP, queue, parse in the worker pool, chunk, index) while the main thread's event-loop delay
 * is recorded, on a fresh database of each backend:
 *   process     Troupe as a child with support/probe.ts preloaded, which measures inside it; a client
 *               sends GET /healthz back to back the whole time (a responsiveness proxy seen from
 *               outside).
 *   in-process  startServer() in this process (as test/support/server.ts does), monitored here.
 * The upload is sent by curl, a separate process, in both modes, so sending 50 MB never runs on
 * the loop being measured; the status is polled with GET every 200 ms until `ready`.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { startServer } from '../../src/server.ts';
import { delay, execFileAsync } from '../support/children.ts';
import { LoopMonitor, type LoopReport } from '../support/probe.ts';
import { summarize } from '../support/report.ts';
import { callJson, freshStore, startTroupe } from '../support/troupe.ts';

export type Backend = 'postgres' | 'pglite';
export type Mode = 'process' | 'in-process';

export interface IngestFile {
  id: string;
  name: string;
  mimeType: string;
  path: string;
  bytes: number;
}

/** Per run: upload and processing time (from the 202 to `ready`), the loop delay idle and during it, GET /healthz latency (process mode). */
export type IngestResult = Awaited<ReturnType<typeof measureIngest>>;

interface Target {
  url: string;
  key: string;
  /** Starts a new window of the main thread's loop delay; returns the window that ended. */
  window(): Promise<LoopReport>;
  stop(): Promise<void>;
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

async function startProcess(settings: Record<string, string>, key: string, resolutionMs: number): Promise<Target> {
  const troupe = await startTroupe({ name: 'troupe-documents', engine: 'node', key, settings, probe: { loopResolutionMs: resolutionMs }, readyTimeoutMs: 120_000 });
  return { url: troupe.base, key, window: async () => (await troupe.probe(30_000)).loop as LoopReport, stop: () => troupe.stop(15_000).then(() => undefined) };
}

async function startInProcess(env: Record<string, string>, key: string, resolutionMs: number): Promise<Target> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', HTTP_ENGINE: 'node', TROUPE_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn', ...env });
  const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
  const server = await startServer(config, createLogger(config.logLevel, sink));
  const monitor = new LoopMonitor(resolutionMs);
  return {
    url: server.url,
    key,
    window: async () => monitor.window(),
    async stop() {
      monitor.stop();
      await server.stop();
    },
  };
}

async function curlUpload(target: Target, characterId: string, file: IngestFile): Promise<{ id: string }> {
  const args = ['-sS', '--max-time', '600', '-H', `authorization: Bearer ${target.key}`, '-F', `file=@${file.path};type=${file.mimeType};filename=${file.name}`, '-w', '\n%{http_code}'];
  const { stdout } = await execFileAsync('curl', [...args, `${target.url}/characters/${characterId}/documents`], { maxBuffer: 16 * 1024 * 1024 });
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
  log: (line: string) => void;
}

export async function measureIngest(o: IngestOptions) {
  const store = await freshStore(o.backend, o.databaseUrl);
  const key = `sk-troupe-docbench${randomBytes(12).toString('base64url')}`;
  const label = `ingest ${o.file.id} ${o.backend} ${o.mode} #${o.run}`;
  let target: Target | null = null;
  try {
    target = o.mode === 'process' ? await startProcess(store.env, key, o.resolutionMs) : await startInProcess(store.env, key, o.resolutionMs);
    const t = target;
    const api = { base: t.url, auth: `Bearer ${key}` };
    const character = await callJson<{ id: string }>(api, 'POST', '/characters', { name: 'Archivist', description: 'Answers from the documents.' }, 201);
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
      doc = await callJson(api, 'GET', `/characters/${character.id}/documents/${uploaded.id}`, undefined, 200);
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
    const healthz = probing ? summarize(busyLatencies) : null;
    return { file: o.file.id, backend: o.backend, mode: o.mode, run: o.run, status: doc.status, chunkCount: doc.chunkCount, uploadMs, processMs, idle, loop, healthz, healthzIdle: probing ? summarize(idleLatencies) : null };
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
