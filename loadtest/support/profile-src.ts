/**
 * Reads Troupe's `--cpu-prof` profile over the via-Troupe measured windows and ranks frames by
 * self time, overall and restricted to the project's own code (src/). Percentages are of the
 * busy samples (everything but "(idle)"), because Troupe idles while the direct runs go on.
 */
import { summarizeProfile, type FrameShare } from './profile.ts';

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
    `  ${p.samples} samples in the via-Troupe windows, ${p.busySamples} busy (not idle); % of busy samples`,
    section('top frames by self time (all code)', p.topSelf),
    section('top src/ frames by self time', p.topSrcSelf),
    section('top src/ frames by inclusive time', p.topSrcInclusive),
    section('self time by package / file', p.modulesSelf),
  ].join('\n');
}
