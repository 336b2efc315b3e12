/**
 * Starts Troupe for the conversations benchmark and talks to it over REST: one process per
 * engine and part, on 127.0.0.1, in-memory database (or a shared PostgreSQL and Redis), with `ulimit -n` raised for many sockets,
 * `--expose-gc` and the heap probe preloaded (see heap-probe.ts), optionally under --cpu-prof.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { delay } from '../support/children.ts';
import { callJson, createCharacter, startTroupe as startHarnessTroupe, type Troupe as HarnessTroupe } from '../support/troupe.ts';
import { openFileLimit, processMemory, withFileLimit } from './proc.ts';
import { BENCH_MODEL } from '../support/upstream-reply.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
export type Engine = 'node' | 'uws';


export interface TroupeOptions {
  engine: Engine;
  nodeBinary: string;
  upstreamUrl: string;
  logLevel: string;
  fdLimit: number;
  cpuProfDir: string | null;
  root: string;
  readyTimeoutMs: number;
  /** Shared PostgreSQL database (default: an in-memory one of its own). */
  databaseUrl?: string;
  /** Actor system over Redis (default: in-process). */
  redisUrl?: string;
  /** Bootstrap key: the same one lets processes on one database share it. */
  key?: string;
  /** Label in messages, e.g. `troupe-node-A` (default `troupe-<engine>`). */
  name?: string;
}

export interface Troupe extends HarnessTroupe {
  engine: Engine;
  logLevel: string;
  /** The soft open-files limit Troupe actually got. */
  fdLimit: number | null;
  probeFile: string;
}

export function newBootstrapKey(): string {
  return `sk-troupe-convbench${randomBytes(12).toString('base64url')}`;
}

export async function startTroupe(options: TroupeOptions): Promise<Troupe> {
  const probeFile = join(tmpdir(), `troupe-conv-bench-heap-${process.pid}-${options.engine}-${randomBytes(4).toString('hex')}.json`);
  const nodeArgs = ['--expose-gc', '--import', pathToFileURL(join(HERE, 'heap-probe.ts')).href];
  if (options.cpuProfDir) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`);
  const troupe = await startHarnessTroupe({
    engine: options.engine,
    nodeBinary: options.nodeBinary,
    logLevel: options.logLevel,
    upstream: { url: options.upstreamUrl, model: BENCH_MODEL },
    settings: {
      ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
      ...(options.redisUrl ? { REDIS_URL: options.redisUrl } : {}),
      BENCH_HEAP_PROBE_FILE: probeFile,
    },
    nodeArgs,
    key: options.key ?? newBootstrapKey(),
    name: options.name,
    readyTimeoutMs: options.readyTimeoutMs,
    wrap: (command, args) => withFileLimit(options.fdLimit, command, args),
  });
  return { ...troupe, engine: options.engine, logLevel: options.logLevel, fdLimit: openFileLimit(troupe.child.pid), probeFile };
}

export async function stopTroupe(troupe: Troupe, graceMs: number): Promise<string> {
  try {
    const exit = await troupe.child.stop(graceMs);
    return `code ${exit.code}, signal ${exit.signal}`;
  } finally {
    await rm(troupe.probeFile, { force: true });
    await rm(`${troupe.probeFile}.tmp`, { force: true });
  }
}

export interface MemorySample {
  /** VmRSS from /proc/<pid>/status, read right after the probe's GC. */
  rss: number;
  peakRss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  mallocedMemory: number;
  gc: boolean;
}

/** One GC pause in Troupe: start (CLOCK_MONOTONIC µs), duration (ms), kind (1 minor, 4 major, 8 incremental, 16 weak callbacks). */
export type GcEvent = [number, number, number];

/** Asks the heap probe for a full GC and memory figures, then reads VmRSS. */
export async function sampleMemory(troupe: Troupe, timeoutMs = 20_000): Promise<MemorySample> {
  return (await probeTroupe(troupe, timeoutMs)).memory;
}

/**
 * Samples (each after a full GC) `gapMs` apart until RSS and the V8 heap's committed size stop
 * moving (two intervals in a row within `toleranceBytes`), at most `maxSamples`; returns the last.
 * After a burst of allocation, V8 shrinks its heap and malloc returns pages to the OS only
 * gradually: a sample taken while that is under way would count the release as a change caused
 * by whatever is being measured.
 */
export async function sampleMemorySettled(
  troupe: Troupe,
  options: { gapMs?: number; maxSamples?: number; toleranceBytes?: number } = {},
): Promise<MemorySample & { rssSamples: number[]; settled: boolean }> {
  const gapMs = options.gapMs ?? 2_000;
  const maxSamples = options.maxSamples ?? 15;
  const tolerance = options.toleranceBytes ?? 2 * 2 ** 20;
  const rssSamples: number[] = [];
  let previous: MemorySample | null = null;
  let calm = 0;
  for (let i = 0; i < maxSamples; i++) {
    if (i > 0) await delay(gapMs);
    const sample = await sampleMemory(troupe);
    rssSamples.push(sample.rss);
    if (previous && Math.abs(sample.rss - previous.rss) <= tolerance && Math.abs(sample.heapTotal - previous.heapTotal) <= tolerance) calm++;
    else calm = 0;
    previous = sample;
    if (calm >= 2) return { ...sample, rssSamples, settled: true };
  }
  if (previous === null) throw new Error('no memory sample');
  return { ...previous, rssSamples, settled: false };
}

/** Like sampleMemory, with the GC pauses Troupe had up to the call (before the forced GC). */
export async function probeTroupe(troupe: Troupe, timeoutMs = 20_000): Promise<{ memory: MemorySample; gcEvents: GcEvent[] }> {
  const previous = await readProbe(troupe.probeFile);
  process.kill(troupe.child.pid, 'SIGUSR2');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await delay(50);
    const report = await readProbe(troupe.probeFile);
    if (report && report.seq > (previous?.seq ?? 0)) {
      const mem = processMemory(troupe.child.pid);
      if (!mem) throw new Error(`cannot read /proc/${troupe.child.pid}/status`);
      const memory: MemorySample = {
        rss: mem.rss,
        peakRss: mem.peakRss,
        heapUsed: report.heapUsed,
        heapTotal: report.heapTotal,
        external: report.external,
        arrayBuffers: report.arrayBuffers,
        mallocedMemory: report.mallocedMemory,
        gc: report.gc,
      };
      return { memory, gcEvents: report.gcEvents ?? [] };
    }
    if (Date.now() > deadline) throw new Error(`troupe-${troupe.engine}: the heap probe did not answer within ${timeoutMs} ms`);
  }
}

interface ProbeReport {
  seq: number;
  gc: boolean;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  mallocedMemory: number;
  gcEvents?: GcEvent[];
}

async function readProbe(file: string): Promise<ProbeReport | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as ProbeReport;
  } catch {
    return null;
  }
}

export async function api<T>(troupe: Troupe, method: string, path: string, body: unknown, expected: number): Promise<T> {
  return (await callJson(troupe, method, path, body, expected)) as T;
}

export { createCharacter };

export async function createConversations(troupe: Troupe, characterId: string, count: number, concurrency = 8): Promise<string[]> {
  const ids: string[] = new Array<string>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const created = await api<{ id?: unknown }>(troupe, 'POST', '/conversations', { characterId }, 201);
      if (typeof created.id !== 'string') throw new Error('POST /conversations returned no id');
      ids[i] = created.id;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, () => worker()));
  return ids;
}

export function wsUrl(troupe: Troupe, conversationId: string): string {
  return `${troupe.base.replace(/^http/, 'ws')}/conversations/${conversationId}/ws?token=${encodeURIComponent(troupe.key)}`;
}
