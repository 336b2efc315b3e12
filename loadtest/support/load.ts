/** The open-loop HTTP load generator: request i starts at t0 + i / (rate * targets) whatever became of the earlier ones (no
 * coordinated omission), the targets interleaved so all live through the same moments of a shared machine; autocannon's closed loop. */
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { startCpuWindow, type CpuWindow, type WatchedProcess } from './proc.ts';
import type { Troupe } from './troupe.ts';
import { LAST_BODY_PATH } from './upstream.ts';

/** stream: an SSE reply is expected; check: null when the whole body is right, else what is wrong (bodies are kept only then). */
export type HttpTarget = {
  label: string; port: number; method: 'GET' | 'POST'; path: string; headers: Record<string, string>; body?: Buffer;
  stream?: boolean; check?: (body: Buffer) => string | null;
};
/** ms in completion order; lag: how late requests went out; monotonicUs: the measured window on V8 profiles' clock. */
export type TargetRun = ReturnType<typeof newRun> & { cpu: CpuWindow | null };
const newRun = (label: string, rate: number) => ({
  label, rate, scheduled: 0, ok: 0, ttfc: [] as number[], total: [] as number[], lag: [] as number[],
  errors: {} as Record<string, number>, errorSamples: {} as Record<string, string>, achievedRps: 0, maxInFlight: 0,
  monotonicUs: { start: 0, end: 0 },
});
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);
const [CONTENT, DONE, none] = [Buffer.from('"content":"'), Buffer.from('data: [DONE]'), Buffer.alloc(0)];
/** Whether `buf` holds a non-empty `"content":"` (the role chunk's content is empty). */
function hasContent(buf: Buffer): boolean {
  for (let at = buf.indexOf(CONTENT); at !== -1; at = buf.indexOf(CONTENT, at + 1)) if (buf[at + CONTENT.length] !== 0x22) return true;
  return false;
}
type Done = (failure: string | null, detail: string, first: number, body: Buffer) => void;
const errorKind = (err: Error): string => (err as NodeJS.ErrnoException).code?.toLowerCase() ?? 'error';
/** Fails on a non-2xx status, a socket error, the timeout, a reply (not) streamed against `stream`, a stream without [DONE], or `check`. */
function send(target: HttpTarget, agent: Agent | undefined, timeoutMs: number, done: Done): void {
  let settled = false;
  const settle: Done = (failure, detail, first, body) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done(failure, detail, first, body);
  };
  const fail = (kind: string, detail: string) => settle(kind, detail, 0, none);
  const headers = target.body ? { ...target.headers, 'content-length': String(target.body.byteLength) } : target.headers;
  const req = httpRequest({ host: '127.0.0.1', port: target.port, method: target.method, path: target.path, headers, agent }, (res) => {
    const status = res.statusCode ?? 0;
    const isStream = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
    const wrong = status < 200 || status > 299 || isStream !== (target.stream === true);
    const keep: Buffer[] | null = wrong || target.check ? [] : null;
    let first = 0;
    let tail: Buffer = none;
    res.on('data', (buf: Buffer) => {
      keep?.push(buf);
      if (wrong) return;
      if (first === 0 && (!target.stream || hasContent(buf))) first = performance.now();
      // Only the end matters: the last chunk (joined with the one before when it is short).
      if (target.stream) tail = buf.length >= DONE.length + 4 ? buf : Buffer.concat([tail, buf]);
    });
    res.on('end', () => {
      const body = keep ? Buffer.concat(keep) : none;
      if (status < 200 || status > 299) return settle(`http_${status}`, body.toString('utf8'), 0, body);
      if (wrong) return settle(isStream ? 'unexpected_stream' : 'not_a_stream', body.toString('utf8'), 0, body);
      if (target.stream && tail.indexOf(DONE) === -1) return settle('no_done', tail.toString('utf8'), 0, body);
      const problem = target.check?.(body) ?? null;
      settle(problem === null ? null : 'bad_body', problem ?? '', first || performance.now(), body);
    });
    res.on('error', (err) => fail(errorKind(err), err.message));
    res.on('close', () => fail('closed_early', 'response closed before its end'));
  });
  const timer = setTimeout(() => (fail('timeout', `no end within ${timeoutMs} ms`), req.destroy()), timeoutMs);
  req.on('error', (err) => fail(errorKind(err), err.message));
  req.end(target.body);
}
export function requestOnce(target: HttpTarget): Promise<{ failure: string | null; detail: string; body: Buffer; ms: number }> {
  const start = performance.now();
  return new Promise((resolve) =>
    send(target, undefined, 15_000, (failure, detail, _first, body) => resolve({ failure, detail, body, ms: performance.now() - start })));
}
/** rate: req/s to each target; watch: processes whose CPU use is recorded over the measured window; onWindow: called when
 * that window opens and when its last request has ended. A keep-alive Agent per target: the least client CPU per request. */
export async function runLoad(targets: readonly HttpTarget[], options: {
  rate: number; warmupSec: number; durationSec: number; watch?: readonly WatchedProcess[]; onWindow?: (edge: 'start' | 'end') => void;
}): Promise<TargetRun[]> {
  const n = targets.length;
  const slots = targets.map((target) => ({
    target, run: { ...newRun(target.label, options.rate), cpu: null } as TargetRun, inFlight: 0, doneInWindow: 0,
    agent: new Agent({ keepAlive: true, maxSockets: 4096, scheduling: 'lifo' }),
  }));
  const interval = 1000 / (options.rate * n);
  const warmupCount = Math.round(options.rate * options.warmupSec) * n;
  const count = warmupCount + Math.round(options.rate * options.durationSec) * n;
  const t0 = performance.now() + 5;
  const windowStart = t0 + warmupCount * interval;
  const windowEnd = windowStart + options.durationSec * 1000;
  const window: { stopCpu: (() => CpuWindow) | null; start: number } = { stopCpu: null, start: 0 };
  let [pending, next] = [0, 0];
  const finished = Promise.withResolvers<void>();
  const fire = (index: number, scheduled: number) => {
    const slot = slots[index % n]!;
    const { run } = slot;
    const measured = index >= warmupCount;
    if (index === warmupCount) {
      options.onWindow?.('start');
      window.stopCpu = options.watch ? startCpuWindow(options.watch) : null;
      window.start = monotonicUs();
    }
    const start = performance.now();
    if (measured) {
      run.scheduled++;
      run.lag.push(start - scheduled);
    }
    pending++;
    run.maxInFlight = Math.max(run.maxInFlight, ++slot.inFlight);
    send(slot.target, slot.agent, 10_000, (failure, detail, first) => {
      const end = performance.now();
      slot.inFlight--;
      if (failure === null && end >= windowStart && end <= windowEnd) slot.doneInWindow++;
      if (measured && failure === null) {
        run.ok++;
        run.ttfc.push(first - start);
        run.total.push(end - start);
      } else if (measured && failure !== null) {
        run.errors[failure] = (run.errors[failure] ?? 0) + 1;
        run.errorSamples[failure] ??= detail.slice(0, 300);
      }
      if (--pending === 0 && next === count) finished.resolve();
    });
  };
  // Every request whose instant has come goes out (late ones at once, in order).
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const now = performance.now();
      for (; next < count && t0 + next * interval <= now; next++) fire(next, t0 + next * interval);
      if (next < count) setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()));
      else resolve();
    };
    setTimeout(tick, Math.max(0, t0 - performance.now()));
  });
  const [cpu, monotonicEnd] = [window.stopCpu?.() ?? null, monotonicUs()];
  if (pending > 0) await finished.promise;
  options.onWindow?.('end');
  for (const { run, doneInWindow, agent } of slots) {
    Object.assign(run, { achievedRps: doneInWindow / options.durationSec, cpu, monotonicUs: { start: window.start, end: monotonicEnd } });
    agent.destroy();
  }
  return slots.map((s) => s.run);
}
/** autocannon's closed loop (`connections` requests always in flight), bounded in time even if the target stalls. */
export function saturate(options: { url: string; connections: number; durationSec: number; headers: Record<string, string> }) {
  type Stats = { requestsPerSec: number; latencyMs: { p50: number; p99: number }; totalRequests: number; failures: number };
  return new Promise<Stats>((resolve, reject) => {
    const instance = autocannon({ ...options, duration: options.durationSec, timeout: 10 }, (err: unknown, r) => {
      clearTimeout(stopTimer);
      if (err) return reject(err instanceof Error ? err : new Error(String(err)));
      const [latencyMs, failures] = [{ p50: r.latency.p50, p99: r.latency.p99 }, r.non2xx + r.errors + r.timeouts];
      resolve({ requestsPerSec: r.requests.average, latencyMs, totalRequests: r.requests.total, failures });
    });
    const stopTimer = setTimeout(() => instance.stop(), (options.durationSec + 10) * 1000);
  });
}
/** POST /perform and, as `direct`, the very request Troupe sent the upstream for it (the upstream
 * keeps the last one) replayed, both pre-flighted; `expected` is the exact body /perform must answer. */
export async function performTargets(troupe: Troupe, characterId: string, line: string, upstreamPort: number, expected?: Buffer) {
  const perform: HttpTarget = {
    label: 'perform', port: troupe.child.port, method: 'POST', path: '/perform',
    headers: { authorization: troupe.auth, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ npcId: characterId, history: [{ role: 'player', content: line }] })),
    check: expected ? (body) => (body.equals(expected) ? null : body.toString('utf8').slice(0, 200)) : undefined,
  };
  const first = await requestOnce(perform);
  if (first.failure !== null) throw new Error(`perform pre-flight: ${first.failure}: ${first.detail}`);
  const res = await fetch(`http://127.0.0.1:${upstreamPort}${LAST_BODY_PATH}`, { signal: AbortSignal.timeout(10_000) });
  const sent = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`upstream ${LAST_BODY_PATH}: ${res.status} ${sent.toString('utf8').slice(0, 200)}`);
  const headers = { authorization: 'Bearer sk-direct-unused', 'content-type': 'application/json', accept: 'text/event-stream' };
  const path = '/v1/chat/completions';
  const direct: HttpTarget = { label: 'direct', port: upstreamPort, method: 'POST', path, body: sent, stream: true, headers };
  const directFirst = await requestOnce({ ...direct, check: () => null });
  if (directFirst.failure !== null) throw new Error(`direct pre-flight: ${directFirst.failure}: ${directFirst.detail}`);
  const length = directFirst.body.byteLength;
  const ending = (body: Buffer) => JSON.stringify(body.subarray(-40).toString('utf8'));
  direct.check = (body) => (body.byteLength === length ? null : `${body.byteLength} bytes (expected ${length}) ending ${ending(body)}`);
  return { perform, direct, preflight: { directMs: directFirst.ms, performMs: first.ms, upstreamRequestBytes: sent.byteLength } };
}
