/**
 * `npm run bench:gateway`: what Troupe adds to an OpenAI-compatible call next to a floor (a bare node:http pipe proxy) and a peer
 * (Portkey's gateway), over one fake upstream. Parts (proxy, cpu, perform, reads) and knobs: docs/benchmarks.md, Gateway: settings. */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { childEnv, execFileAsync, freePort, gitState, launch, machine, runBench, type Run } from './support/children.ts';
import { envFlag, envList, envLogLevel, envNumber, envRates, envText } from './support/env.ts';
import { monotonicUs, performTargets, requestOnce, runLoad, saturate, type HttpTarget, type TargetRun } from './support/load.ts';
import { processCpuSeconds, waitForQuiet, type CpuWindow } from './support/proc.ts';
import { profileText } from './support/profile.ts';
import { fixed, markdownTable, ms, RESULTS_DIR, summarize, writeResults } from './support/report.ts';
import { callJson, createCharacter, startTroupe, uwsEngineNode, type Engine } from './support/troupe.ts';
import { BENCH_MODEL, startServer, startUpstream } from './support/upstream.ts';

/** The proxies compared, in the summary's column order. */
const PROXIES = ['pipe', 'troupe-upstream-model', 'troupe-character', 'portkey'] as const;
const HEADINGS = ['bare pipe (floor)', 'Troupe, upstream model', 'Troupe, character as model', 'Portkey'];
const cfg = {
  rates: envRates('BENCH_RATES', '50,100,200'), durationSec: envNumber('BENCH_DURATION', 10, 1, false),
  warmupSec: envNumber('BENCH_WARMUP', 2, 0, false), cpuRate: envNumber('BENCH_CPU_RATE', 100, 1, false),
  cpuDurationSec: envNumber('BENCH_CPU_DURATION', 5, 1, false), cpuRounds: envNumber('BENCH_CPU_ROUNDS', 5, 1), performRate: envNumber('BENCH_PERFORM_RATE', 50, 1, false),
  readConnections: envNumber('BENCH_READ_CONNECTIONS', 50, 1), tokens: envNumber('BENCH_TOKENS', 20, 1),
  chunkDelayMs: envNumber('BENCH_CHUNK_DELAY_MS', 2, 0), engine: (envText('BENCH_ENGINE') ?? 'node') as Engine,
  logLevel: envLogLevel('BENCH_LOG_LEVEL', 'info'), parts: envList('BENCH_PARTS', ['proxy', 'cpu', 'perform', 'reads'] as const),
  proxies: envList('BENCH_TARGETS', PROXIES), cpuProf: envFlag('BENCH_CPU_PROF'), quietWaitSec: envNumber('BENCH_QUIET_WAIT', 10, 0, false),
};
if (cfg.engine !== 'node' && cfg.engine !== 'uws') throw new Error(`BENCH_ENGINE must be node or uws, got '${String(cfg.engine)}'`);
const MESSAGES = [{ role: 'user', content: 'The fog is thick tonight. Which ships came in, and did any of them fly a black flag?' }];
const PORTKEY_VERSION = '1.15.2';
type Mode = 'streaming' | 'non-streaming';
type Phase = ReturnType<typeof phaseResult>;
/** cpuMsPerCall is NaN (null in the JSON) where /proc could not be read. */
type CpuRow = { label: string; process: string; rate: number; calls: number; failures: number; cpuMsPerCall: number; stream?: boolean;
  engine?: string; latencyMs?: { p50: number; p99: number } };
const result = {
  config: cfg, machine: machine(), git: { head: '', dirtySrc: [] as string[] }, startedAt: '',
  proxy: [] as (Phase & { rate: number; mode: Mode; cpuPercent: CpuWindow | null })[], cpu: [] as CpuRow[],
  perform: null as (Phase & { rate: number }) | null, reads: [] as CpuRow[], notes: [] as string[], profile: null as string | null,
};
/** Per target: p50/p99, failures, generator lag (p99 ms: large means the client was slow) and each percentile minus direct's. */
function phaseResult(runs: readonly TargetRun[]) {
  const p50p99 = (values: readonly number[]) => (({ p50, p99 }) => ({ p50, p99 }))(summarize(values));
  const direct = runs.find((r) => r.label === 'direct');
  const d = { ttfc: p50p99(direct?.ttfc ?? []), total: p50p99(direct?.total ?? []) };
  return { targets: runs.map((r) => {
    const [ttfc, total] = [p50p99(r.ttfc), p50p99(r.total)];
    const added = { ttfcP50: ttfc.p50 - d.ttfc.p50, ttfcP99: ttfc.p99 - d.ttfc.p99, totalP50: total.p50 - d.total.p50,
      totalP99: total.p99 - d.total.p99 };
    return { label: r.label, scheduled: r.scheduled, ok: r.ok, failures: r.scheduled - r.ok, errors: r.errors,
      errorSample: Object.values(r.errorSamples)[0] ?? null, ttfc, total, lagP99: summarize(r.lag).p99, added };
  }) };
}
const cpuPerCall = (before: number | null, after: number | null, calls: number) => ((after ?? NaN) - (before ?? NaN)) * 1000 / calls;
/** Portkey's open-source gateway (the peer): installed on first use into a cache folder, never a project dependency. */
async function startPortkey() {
  try {
    const dir = join(process.env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache'), 'troupe-bench', `portkey-${PORTKEY_VERSION}`);
    const script = join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
    const install = ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', `@portkey-ai/gateway@${PORTKEY_VERSION}`];
    if (!existsSync(script)) await execFileAsync('npm', install, { timeout: 300_000, maxBuffer: 1 << 24 });
    const port = await freePort();
    return await launch({ name: 'portkey', command: process.execPath, args: [script, `--port=${port}`, '--headless'], port,
      env: childEnv({ NODE_ENV: 'production' }), cwd: join(script, '..'), healthPath: '/', readyTimeoutMs: 30_000 });
  } catch (err) {
    // Without the peer the run goes on, and says so.
    result.notes.push(`Portkey's gateway could not be installed or started, so it is missing: ${(err as Error).message.split('\n')[0]}`);
    return null;
  }
}
/** With BENCH_CPU_PROF: the top frames of the profile Troupe wrote into `dir` on its way out. */
async function addProfile(dir: string, label: string, window: { start: number; end: number }): Promise<void> {
  const text = cfg.cpuProf ? await profileText(dir, window, label) : null;
  if (text) result.profile = [result.profile, text].filter(Boolean).join('\n\n');
}
/** proxy, cpu and perform: one upstream, the pipe, one Troupe and Portkey, stopped at the end. */
async function chatParts({ stamp, log }: Run, uwsNode: string | null): Promise<void> {
  const upstream = await startUpstream({ BENCH_REPLY_TOKENS: String(cfg.tokens), BENCH_REPLY_GAP_MS: String(cfg.chunkDelayMs) });
  const upstreamV1 = `http://127.0.0.1:${upstream.port}/v1`;
  const pipe = await startServer(['pipe'], { BENCH_UPSTREAM_PORT: String(upstream.port) });
  const profDir = join(RESULTS_DIR, `cpuprof-gateway-${stamp}`);
  const troupe = await startTroupe({ engine: cfg.engine, nodeBinary: cfg.engine === 'uws' ? (uwsNode ?? undefined) : undefined,
    logLevel: cfg.logLevel, upstream: { url: upstreamV1, model: BENCH_MODEL }, cpuProfDir: cfg.cpuProf ? profDir : null });
  const characterId = await createCharacter(troupe);
  const wantsPortkey = cfg.proxies.includes('portkey') && cfg.parts.some((p) => p === 'proxy' || p === 'cpu');
  const portkey = wantsPortkey ? await startPortkey() : null;
  const [plain, auth] = [{ authorization: 'Bearer sk-bench-upstream' }, { authorization: troupe.auth }];
  const candidates: [string, typeof upstream | null, string, Record<string, string>][] = [
    ['direct', upstream, BENCH_MODEL, plain], ['pipe', pipe, BENCH_MODEL, plain],
    ['troupe-upstream-model', troupe.child, BENCH_MODEL, auth], ['troupe-character', troupe.child, characterId, auth],
    ['portkey', portkey, BENCH_MODEL, { ...plain, 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamV1 }],
  ];
  /** The chosen targets in one mode that answer a first request; only Portkey may fail it (its streaming does on this upstream). */
  const targetsFor = async (stream: boolean) => {
    const passed: (HttpTarget & { server: typeof upstream })[] = [];
    for (const [label, server, model, headers] of candidates) {
      if (!server || (label !== 'direct' && !(cfg.proxies as string[]).includes(label))) continue;
      const body = { model, messages: MESSAGES, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) };
      const target = { label, server, port: server.port, method: 'POST' as const, path: '/v1/chat/completions', stream,
        body: Buffer.from(JSON.stringify(body)), headers: { 'content-type': 'application/json', ...headers } };
      const got = await requestOnce(target);
      const why = `${got.failure}: ${got.detail}`.slice(0, 200);
      if (got.failure === null) passed.push(target);
      else if (label !== 'portkey') throw new Error(`pre-flight failed for ${label}: ${why}`);
      else result.notes.push(`Portkey's ${stream ? '' : 'non-'}streaming pre-flight failed (${why}), so it is compared on ` +
        `${stream ? 'non-' : ''}streaming calls only.`);
    }
    return passed;
  };
  const [streamTargets, plainTargets] = [await targetsFor(true), await targetsFor(false)];
  const named = { upstream, pipe, troupe: troupe.child, portkey };
  const watched = Object.entries(named).flatMap(([name, c]) => (c ? [{ name, pid: c.pid }] : []));
  const measuredFrom = monotonicUs();
  for (const rate of cfg.parts.includes('proxy') ? cfg.rates : []) {
    for (const [mode, targets] of [['streaming', streamTargets], ['non-streaming', plainTargets]] as const) {
      const others = (await waitForQuiet(cfg.quietWaitSec, 60, watched)).otherPercent?.toFixed(0) ?? '?';
      log(`proxy: ${mode} at ${rate} req/s per target (${targets.length} targets interleaved; others used ${others}% of a core before)`);
      const runs = await runLoad(targets, { rate, warmupSec: cfg.warmupSec, durationSec: cfg.durationSec, watch: watched });
      result.proxy.push({ rate, mode, ...phaseResult(runs), cpuPercent: runs[0]?.cpu ?? null });
    }
  }
  // Targets take turns in short windows, so a machine that speeds up or slows down during the part weighs on each alike.
  const cpuTargets = cfg.parts.includes('cpu') ? [...streamTargets, ...plainTargets] : [];
  const cpuSums = cpuTargets.map(() => ({ seconds: 0, calls: 0, ok: 0 }));
  for (let round = 0; round < cfg.cpuRounds; round++) {
    for (const [i, target] of cpuTargets.entries()) {
      const cpu: (number | null)[] = [];
      const onWindow = () => void cpu.push(processCpuSeconds(target.server.pid));
      const [run] = await runLoad([target], { rate: cfg.cpuRate, warmupSec: round === 0 ? 1 : 0.3, durationSec: cfg.cpuDurationSec / cfg.cpuRounds, onWindow });
      const sum = cpuSums[i]!;
      [sum.seconds, sum.calls, sum.ok] = [sum.seconds + (cpu[1] ?? NaN) - (cpu[0] ?? NaN), sum.calls + (run?.scheduled ?? 0), sum.ok + (run?.ok ?? 0)];
    }
  }
  for (const [i, target] of cpuTargets.entries()) {
    const { seconds, calls, ok } = cpuSums[i]!;
    result.cpu.push({ label: target.label, process: target.server.name, rate: cfg.cpuRate, calls, failures: calls - ok,
      cpuMsPerCall: (seconds * 1000) / calls, stream: target.stream });
  }
  if (cfg.parts.includes('perform')) {
    const { perform, direct } = await performTargets(troupe, characterId, MESSAGES[0]?.content ?? '', upstream.port);
    const runs = await runLoad([direct, perform], { rate: cfg.performRate, warmupSec: cfg.warmupSec, durationSec: cfg.durationSec });
    result.perform = { rate: cfg.performRate, ...phaseResult(runs) };
  }
  const measuredTo = monotonicUs();
  // A graceful stop lets --cpu-prof write its profile.
  await Promise.all([pipe.stop(), portkey?.stop(), troupe.stop(30_000), upstream.stop()]);
  await addProfile(profDir, `troupe-${cfg.engine}, proxy/cpu/perform`, { start: measuredFrom, end: measuredTo });
}
/** GET /characters/{id}: each server alone under autocannon, Troupe on both engines against the bare servers. */
async function reads({ stamp }: Run, uwsNode: string | null): Promise<void> {
  if (!uwsNode) result.notes.push('No Node here can load uWebSockets.js: the uWS read rows are missing.');
  for (const engine of uwsNode ? (['uws', 'node'] as const) : (['node'] as const)) {
    const nodeBinary = engine === 'uws' ? (uwsNode ?? undefined) : undefined;
    const profDir = join(RESULTS_DIR, `cpuprof-gateway-${stamp}`, `reads-${engine}`);
    const troupe = await startTroupe({ engine, nodeBinary, logLevel: cfg.logLevel, cpuProfDir: cfg.cpuProf ? profDir : null });
    const id = await createCharacter(troupe);
    const body = JSON.stringify(await callJson(troupe, 'GET', `/characters/${id}`, undefined, 200));
    const bare = await startServer(['bare', engine], { BENCH_BODY: body }, nodeBinary);
    let window = { start: 0, end: 0 };
    for (const server of [troupe.child, bare]) {
      // The same (ignored by the bare server) header both ways, so requests are byte for byte alike.
      const headers = { authorization: troupe.auth };
      const load = { url: `http://127.0.0.1:${server.port}/characters/${id}`, connections: cfg.readConnections, headers };
      await saturate({ ...load, durationSec: 1 });
      const [before, start] = [processCpuSeconds(server.pid), monotonicUs()];
      const { requestsPerSec, totalRequests: calls, failures, latencyMs } = await saturate({ ...load, durationSec: cfg.cpuDurationSec });
      if (server === troupe.child) window = { start, end: monotonicUs() };
      result.reads.push({ engine, label: 'read', process: server.name, rate: Math.round(requestsPerSec), calls, failures,
        cpuMsPerCall: cpuPerCall(before, processCpuSeconds(server.pid), calls), latencyMs });
    }
    await Promise.all([bare.stop(), troupe.stop(30_000)]);
    await addProfile(profDir, `troupe-${engine}, reads`, window);
  }
}
const rates = () => [...new Set(result.proxy.map((p) => p.rate))];
const find = (rate: number, mode: Mode, label: string) =>
  result.proxy.find((p) => p.rate === rate && p.mode === mode)?.targets.find((t) => t.label === label);
const added = (rate: number, mode: Mode, label: string) => find(rate, mode, label)?.added;
const performAdded = () => result.perform?.targets.find((t) => t.label === 'perform')?.added;
const cpuOf = (label: string, stream: boolean) => result.cpu.find((c) => c.label === label && c.stream === stream)?.cpuMsPerCall;
const ADDED_ROWS = [['streaming', 'ttfcP50', 'time to first content, p50'], ['streaming', 'ttfcP99', 'time to first content, p99'],
  ['non-streaming', 'totalP50', 'total, p50'], ['non-streaming', 'totalP99', 'total, p99']] as const;
/** The table: per rate, each proxy's percentiles minus direct's (failures: `ok` below); CPU per call; perform's. */
function summaryTable(): string {
  const row = (name: string, cell: (label: string) => number | undefined) => [name, ...PROXIES.map((label) => ms(cell(label)))];
  const rows = rates().flatMap((rate) => ADDED_ROWS.map(([mode, key, name]) =>
    row(`${mode}, ${name} @ ${rate}/s`, (label) => added(rate, mode, label)?.[key])));
  for (const stream of result.cpu.length > 0 ? [true, false] : []) {
    rows.push(row(`server CPU per ${stream ? 'stream' : 'non-streaming call'} at ${cfg.cpuRate} req/s`, (label) => cpuOf(label, stream)));
  }
  // POST /perform minus the same upstream call made directly: Troupe only, with a character.
  const perform = (key: 'totalP50' | 'totalP99') => (label: string) => (label === 'troupe-character' ? performAdded()?.[key] : undefined);
  if (result.perform) rows.push(row(`POST /perform, total, p50 @ ${cfg.performRate}/s`, perform('totalP50')));
  if (result.perform) rows.push(row(`POST /perform, total, p99 @ ${cfg.performRate}/s`, perform('totalP99')));
  return markdownTable(['added to direct (ms)', ...HEADINGS], rows, 'lrrrr');
}
/** Every target's figures (perform's pair too); "client lag": how late the generator sent; "other CPU %": the rest of the machine. */
function detailTable(): string {
  const perform = result.perform ? [{ ...result.perform, mode: 'perform', cpuPercent: null }] : [];
  const rows = [...result.proxy, ...perform].flatMap((p) => p.targets.map((t) => [
    p.rate, p.mode, t.label, ms(t.ttfc.p50), ms(t.ttfc.p99), ms(t.total.p50), ms(t.total.p99), `${t.ok}/${t.scheduled}`,
    Object.entries(t.errors).map(([k, n]) => `${k}:${n}`).join(' ') || '0', ms(t.lagP99), fixed(p.cpuPercent?.other, 0, '?'),
  ]));
  return markdownTable(['req/s', 'mode', 'target', 'first content p50', 'p99', 'total p50', 'p99', 'ok', 'errors', 'client lag p99',
    'other CPU %'], rows, 'rllrrrrrrrr');
}
function readsTable(): string {
  const bareUws = result.reads.find((c) => c.process === 'bare-uws')?.rate;
  const rows = result.reads.map((c) => [c.engine ?? '?', c.process, c.rate, bareUws ? (c.rate / bareUws).toFixed(2) : '—',
    ms(c.latencyMs?.p50), ms(c.latencyMs?.p99), c.failures, `${fixed(c.cpuMsPerCall * 1000, 1)} µs`]);
  return markdownTable(['engine', 'server', 'req/s', 'req/s ÷ bare uWS', 'p50 (ms)', 'p99 (ms)', 'non-2xx / errors',
    'server CPU per request'], rows, 'llrrrrrr');
}
/** Issue 12 item 2, goal by goal; a goal whose figures were not all measured is left out. */
function goalsTable(): string {
  const rows: string[][] = [];
  const goal = (name: string, figures: (number | undefined)[], test: (...v: number[]) => boolean) => {
    if (figures.every(Number.isFinite)) rows.push([name, test(...(figures as number[])) ? 'MET' : 'NOT met']);
  };
  for (const rate of rates()) {
    const [f, t] = [added(rate, 'streaming', 'pipe'), added(rate, 'streaming', 'troupe-character')];
    goal(`streaming first content @ ${rate}/s: added p50 ≤ floor + 0.3 ms, p99 ≤ 2x floor`, [f?.ttfcP50, t?.ttfcP50, f?.ttfcP99,
      t?.ttfcP99], (f50, t50, f99, t99) => t50 <= f50 + 0.3 && t99 <= 2 * Math.max(f99, 0));
  }
  const top = Math.max(...rates());
  const topFailures = ['troupe-character', 'troupe-upstream-model'].map((label) => find(top, 'streaming', label)?.failures);
  goal(`no streaming failures at ${top}/s`, topFailures, (...f) => f.every((x) => x === 0));
  goal('CPU per stream ≤ 1.5x floor', [cpuOf('troupe-character', true), cpuOf('pipe', true)], (t, f) => t <= 1.5 * f);
  goal("CPU per non-streaming call below Portkey's", [cpuOf('troupe-character', false), cpuOf('portkey', false)], (t, p) => t < p);
  for (const rate of rates()) {
    const [t, p] = [added(rate, 'non-streaming', 'troupe-character'), added(rate, 'non-streaming', 'portkey')];
    goal(`non-streaming added p50 and p99 below Portkey's @ ${rate}/s`, [t?.totalP50, p?.totalP50, t?.totalP99, p?.totalP99],
      (t50, p50, t99, p99) => t50 < p50 && t99 < p99);
  }
  goal('perform added p50 ≤ 1 ms, p99 ≤ 3 ms', [performAdded()?.totalP50, performAdded()?.totalP99], (p50, p99) => p50 <= 1 && p99 <= 3);
  for (const engine of ['uws', 'node']) {
    const [troupe, bare] = ['troupe', 'bare'].map((name) => result.reads.find((c) => c.engine === engine && c.process.startsWith(name)));
    goal(`GET /characters/{id} CPU ≤ 2x bare ${engine}`, [troupe?.cpuMsPerCall, bare?.cpuMsPerCall], (t, b) => t <= 2 * b);
  }
  return rows.length > 0 ? markdownTable(['goal', 'verdict'], rows, 'll') : '';
}
runBench('bench:gateway', 60 * 60_000, async (run) => {
  Object.assign(result, { git: await gitState(), startedAt: new Date(run.started).toISOString() });
  const uwsNode = cfg.engine === 'uws' || cfg.parts.includes('reads') ? (await uwsEngineNode(true, run.log)).path : null;
  if (cfg.engine === 'uws' && uwsNode === null) throw new Error('BENCH_ENGINE=uws but no Node here can load uWebSockets.js');
  if (cfg.parts.some((p) => p !== 'reads')) await chatParts(run, uwsNode);
  if (cfg.parts.includes('reads')) await reads(run, uwsNode);
  const goals = goalsTable();
  const changed = result.git.dirtySrc.length > 0 ? `, src/ changed: ${result.git.dirtySrc.length} files` : '';
  const markdown = [
    `## bench:gateway, ${result.startedAt} (HEAD ${result.git.head}${changed})`,
    ...(result.proxy.length > 0 || result.cpu.length > 0 || result.perform ? [summaryTable()] : []),
    ...(result.proxy.length > 0 || result.perform ? ['### Every target', detailTable()] : []),
    ...(result.reads.length > 0 ? ['### GET /characters/{id} (autocannon, each server alone; bench:http)', readsTable()] : []),
    ...(goals ? ['### Goals (issue 12, item 2)', goals] : []),
    ...(result.notes.length > 0 ? ['### Notes', result.notes.map((n) => `- ${n}`).join('\n')] : []),
    ...(result.profile ? ['### CPU profile of Troupe', `\`\`\`\n${result.profile}\n\`\`\``] : []),
  ].join('\n\n');
  const paths = await writeResults('gateway', run.stamp, result, markdown);
  process.stdout.write(`${markdown}\n\nWrote ${paths.json}\nand ${paths.markdown}\n`);
});
