/** Numbers read off what the load saw: recovery times, latency summaries, readiness, logs. */
import type { Cluster, Slot } from './cluster.ts';
import type { Load, Outcome, Send } from './load.ts';
import { summarize } from '../support/stats.ts';

export interface Spread {
  n: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export function spread(values: readonly number[]): Spread {
  const s = summarize(values);
  const r = (v: number) => (Number.isFinite(v) ? Math.round(v) : null);
  return { n: s.count, p50: r(s.p50), p99: r(s.p99), max: r(s.max) };
}

/**
 * Per conversation (indices in `convs`), ms from `since` to the first 200 among the sends that
 * match `which`; conversations with none yet are `missing`.
 */
export function recovery(load: Load, convs: readonly number[], since: number, which: (s: Send) => boolean): { times: number[]; missing: number[] } {
  const times: number[] = [];
  const missing: number[] = [];
  for (const conv of convs) {
    // A 200 carrying the reply to another message is not an answer.
    const ok = load.sends.filter((s) => s.conv === conv && s.status === 200 && s.answeredTag === s.tag && which(s)).map((s) => s.t1);
    if (ok.length === 0) missing.push(conv);
    else times.push(Math.min(...ok) - since);
  }
  return { times, missing };
}

/** Resolves once `done()` holds or `capMs` passed; true if it held. */
export async function waitUntil(done: () => boolean, capMs: number): Promise<boolean> {
  const end = performance.now() + capMs;
  while (!done()) {
    if (performance.now() > end) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

/** Outcomes by status or error code, e.g. `{ "200": 40, "503 database_unavailable": 12, "ECONNREFUSED": 3 }`. */
export function tally(outcomes: readonly Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) {
    const key = o.status === null ? String(o.code) : o.status === 200 ? '200' : `${o.status} ${o.code ?? ''}`.trim();
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** After `from`: when `/readyz` on the slot first failed, and when it answered 200 again (ms after `from`). */
export function readiness(load: Load, via: Slot, from: number): { notReadyAfterMs: number | null; readyAgainAfterMs: number | null } {
  const polls = load.ready.filter((r) => r.via === via && r.t >= from);
  const down = polls.find((r) => !r.ok);
  const up = down ? polls.find((r) => r.t > down.t && r.ok) : undefined;
  return { notReadyAfterMs: down ? Math.round(down.t - from) : null, readyAgainAfterMs: up ? Math.round(up.t - from) : null };
}

/** Warnings and errors each process logged, by message, with one example line each. */
export function logSummary(cluster: Cluster): Record<string, { counts: Record<string, number>; examples: string[]; exit: string }> {
  const out: Record<string, { counts: Record<string, number>; examples: string[]; exit: string }> = {};
  for (const node of cluster.all) {
    const counts: Record<string, number> = {};
    const examples: string[] = [];
    // From the `troupe listening` line on: start-up notes (no pgvector, no uWS) are not the outage's.
    const stdout = node.proc.stdout();
    const from = stdout.indexOf('"msg":"troupe listening"');
    for (const line of [...stdout.slice(from < 0 ? 0 : from).split('\n').slice(1), ...node.proc.stderr().split('\n')]) {
      if (!line.trim()) continue;
      let entry: { level?: number; msg?: string; err?: { message?: string } };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        counts['(not JSON)'] = (counts['(not JSON)'] ?? 0) + 1;
        if (examples.length < 6) examples.push(line.slice(0, 300));
        continue;
      }
      if ((entry.level ?? 0) < 40 && !/listed again|shutting down/.test(entry.msg ?? '')) continue;
      // Ids and ports vary line to line; the message is what to count by.
      const detail = (entry.err?.message ?? '').replace(/\b(conv|reply|req)_\w+/g, '$1_…').replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:…').slice(0, 120);
      const key = `${entry.level ?? '?'} ${entry.msg ?? '?'}${detail ? `: ${detail}` : ''}`;
      if (counts[key] === undefined && examples.length < 6) examples.push(line.slice(0, 400));
      counts[key] = (counts[key] ?? 0) + 1;
    }
    const { exitCode, signalCode } = node.proc.child;
    out[node.label] = { counts, examples, exit: exitCode === null && signalCode === null ? 'running' : `${exitCode ?? signalCode}` };
  }
  return out;
}

/** How many lines, over every process, logged `msg`. */
export function logLines(cluster: Cluster, msg: string): number {
  const needle = `"msg":${JSON.stringify(msg)}`;
  return cluster.all.reduce((n, node) => n + node.proc.stdout().split(needle).length - 1, 0);
}
