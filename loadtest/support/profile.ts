/** Top frames of Troupe's `--cpu-prof` (BENCH_CPU_PROF) in the measured windows only, so start-up work does not drown the request path. */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';

type CallFrame = { functionName: string; url: string; lineNumber: number };
type CpuProfile = {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[]; startTime: number; samples?: number[]; timeDeltas?: number[];
};
const META = new Set(['(root)', '(program)', '(idle)', '(garbage collector)']);
const shortUrl = (url: string) => url.replace(`file://${process.cwd()}/`, '');
const frameKey = (f: CallFrame) =>
  (f.url ? `${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${f.lineNumber + 1}` : f.functionName || '(anonymous)');
/** By package (node_modules/<pkg>), project file, or node internal module. */
const moduleKey = (f: CallFrame) => {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url)?.[1];
  return f.url ? (pkg ? `pkg:${pkg}` : shortUrl(f.url)) : f.functionName || '(native)';
};
/** The top frames of the newest main-thread profile in `dir` (`CPU.<date>.<time>.<pid>.<thread 0>.<seq>.cpuprofile`), or null;
 * `window` in CLOCK_MONOTONIC µs (the profile's clock), the whole profile if no sample falls in it. Percentages are of the busy
 * samples (all but "(idle)"): Troupe idles while others are measured. */
export async function profileText(dir: string, window: { start: number; end: number } | null, label: string): Promise<string | null> {
  const name = (await readdir(dir).catch(() => [] as string[])).filter((n) => /\.\d+\.0\.\d+\.cpuprofile$/.test(n)).sort().at(-1);
  if (name === undefined) return null;
  const file = join(dir, name);
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const pick = (useWindow: boolean) => {
    let t = profile.startTime;
    const inWindow = () => !useWindow || !window || (t >= window.start && t <= window.end);
    return (profile.samples ?? []).filter((_, i) => ((t += profile.timeDeltas?.[i] ?? 0), inWindow()));
  };
  let chosen = pick(true);
  if (chosen.length === 0) chosen = pick(false);
  const [self, inclusive, modules] = [new Map<string, number>(), new Map<string, number>(), new Map<string, number>()];
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  for (const id of chosen) {
    const node = byId.get(id);
    if (!node) continue;
    bump(self, frameKey(node.callFrame));
    bump(modules, moduleKey(node.callFrame));
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const frame = byId.get(cur)?.callFrame;
      const k = frame ? frameKey(frame) : null;
      if (!k || META.has(k) || seen.has(k)) continue;
      seen.add(k);
      bump(inclusive, k);
    }
  }
  const busy = Math.max(1, chosen.length - (self.get('(idle)') ?? 0));
  const section = (title: string, map: Map<string, number>, keep: (frame: string) => boolean) => [`  ${title}:`,
    ...[...map.entries()].filter(([f]) => keep(f)).sort((a, b) => b[1] - a[1]).slice(0, 12)
      .map(([frame, samples]) => `    ${((100 * samples) / busy).toFixed(1).padStart(5)}%  ${frame}`)];
  const isSrc = (f: string) => / src\//.test(f);
  const notIdle = (f: string) => f !== '(idle)';
  return [
    `CPU profile of Troupe (${label}): ${file}`,
    `  ${chosen.length} samples in the measured windows, ${busy} busy (not idle); % of busy samples`,
    ...section('top frames by self time (all code)', self, notIdle),
    ...section('top src/ frames by self time', self, isSrc),
    ...section('top src/ frames by inclusive time', inclusive, isSrc),
    ...section('self time by package / file', modules, notIdle),
  ].join('\n');
}
