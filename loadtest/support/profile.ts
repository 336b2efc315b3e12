import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Summarises a V8 `.cpuprofile` (written by `node --cpu-prof`) into top frames by self and by
 * inclusive samples, optionally restricted to a time window (the measured load run), so startup
 * work (migrations, WASM compilation) does not drown the request path.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface FrameShare {
  frame: string;
  samples: number;
  percent: number;
}

export interface ProfileSummary {
  file: string;
  samplesInWindow: number;
  windowApplied: boolean;
  topSelf: FrameShare[];
  topInclusive: FrameShare[];
  topModulesSelf: FrameShare[];
}

/** Meta nodes that have no useful inclusive meaning. */
const META = new Set(['(root)', '(program)', '(idle)', '(garbage collector)']);

export async function newestProfile(dir: string): Promise<string | null> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return null;
  }
  const profiles = names.filter((n) => n.endsWith('.cpuprofile')).sort();
  const last = profiles.at(-1);
  return last === undefined ? null : join(dir, last);
}

async function summarizeProfile(
  file: string,
  window: { start: number; end: number } | null,
  top = 15,
): Promise<ProfileSummary> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];

  const pick = (useWindow: boolean): number[] => {
    const picked: number[] = [];
    let t = profile.startTime;
    for (let i = 0; i < samples.length; i++) {
      t += deltas[i] ?? 0;
      const id = samples[i];
      if (id === undefined) continue;
      if (useWindow && window && (t < window.start || t > window.end)) continue;
      picked.push(id);
    }
    return picked;
  };
  let windowApplied = window !== null;
  let chosen = pick(windowApplied);
  if (chosen.length === 0) {
    // Clocks did not line up (should not happen on Linux): fall back to the whole profile.
    windowApplied = false;
    chosen = pick(false);
  }

  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const modules = new Map<string, number>();
  for (const id of chosen) {
    const node = byId.get(id);
    if (!node) continue;
    const key = frameKey(node.callFrame);
    bump(self, key);
    bump(modules, moduleKey(node.callFrame));
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const frame = byId.get(cur)?.callFrame;
      if (!frame) break;
      const k = frameKey(frame);
      if (META.has(k) || seen.has(k)) continue;
      seen.add(k);
      bump(inclusive, k);
    }
  }
  const total = chosen.length;
  return {
    file,
    samplesInWindow: total,
    windowApplied,
    topSelf: ranked(self, total, top),
    topInclusive: ranked(inclusive, total, top),
    topModulesSelf: ranked(modules, total, top),
  };
}

function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

function ranked(map: Map<string, number>, total: number, top: number): FrameShare[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([frame, samples]) => ({ frame, samples, percent: total === 0 ? 0 : (100 * samples) / total }));
}

function shortUrl(url: string): string {
  const cwd = `file://${process.cwd()}/`;
  return url.startsWith(cwd) ? url.slice(cwd.length) : url;
}

function frameKey(frame: CallFrame): string {
  const name = frame.functionName || '(anonymous)';
  if (!frame.url) return name;
  return `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

/** Groups frames by package (node_modules/<pkg>), project file, or node internal module. */
function moduleKey(frame: CallFrame): string {
  if (!frame.url) return frame.functionName || '(native)';
  const url = shortUrl(frame.url);
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm?.[1]) return `pkg:${nm[1]}`;
  return url;
}

/**
 * The same profile over the measured windows, frames ranked by self time overall and within the
 * project's own code (src/). Percentages are of the busy samples (everything but "(idle)"),
 * because Troupe idles while other targets are measured.
 */
export interface SrcProfile {
  file: string;
  samples: number;
  busySamples: number;
  topSelf: FrameShare[];
  topSrcSelf: FrameShare[];
  topSrcInclusive: FrameShare[];
  modulesSelf: FrameShare[];
}

const ALL = 1_000_000;

export async function summarizeSrcProfile(file: string, window: { start: number; end: number } | null, top = 12): Promise<SrcProfile> {
  const summary = await summarizeProfile(file, window, ALL);
  const idle = summary.topSelf.find((f) => f.frame === '(idle)')?.samples ?? 0;
  const busy = Math.max(1, summary.samplesInWindow - idle);
  const rebase = (rows: FrameShare[]) => rows.map((r) => ({ ...r, percent: (100 * r.samples) / busy }));
  const isSrc = (f: FrameShare) => / src\//.test(f.frame);
  return {
    file,
    samples: summary.samplesInWindow,
    busySamples: busy,
    topSelf: rebase(summary.topSelf.filter((f) => f.frame !== '(idle)').slice(0, top)),
    topSrcSelf: rebase(summary.topSelf.filter(isSrc).slice(0, top)),
    topSrcInclusive: rebase(summary.topInclusive.filter(isSrc).slice(0, top)),
    modulesSelf: rebase(summary.topModulesSelf.filter((f) => f.frame !== '(idle)').slice(0, top)),
  };
}

export function formatSrcProfile(p: SrcProfile, label: string): string {
  const section = (title: string, rows: FrameShare[]) =>
    [`  ${title}:`, ...rows.map((r) => `    ${r.percent.toFixed(1).padStart(5)}%  ${r.frame}`)].join('\n');
  return [
    `CPU profile of Troupe (${label}): ${p.file}`,
    `  ${p.samples} samples in the measured windows, ${p.busySamples} busy (not idle); % of busy samples`,
    section('top frames by self time (all code)', p.topSelf),
    section('top src/ frames by self time', p.topSrcSelf),
    section('top src/ frames by inclusive time', p.topSrcInclusive),
    section('self time by package / file', p.modulesSelf),
  ].join('\n');
}
