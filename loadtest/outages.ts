/**
 * `npm run bench:outages` (issue 16): how long Troupe takes to answer again after a fault, and
 * whether any message is lost, duplicated or reordered (goal: none). Each scenario runs on a fresh
 * cluster (outage-support/cluster.ts) under load (load.ts), injects its fault (scenarios.ts), keeps
 * the load up BENCH_AFTER_MS more and checks every history and socket stream (check.ts):
 *   redis Redis SIGKILLed, started again empty; kill A SIGKILLed, per BENCH_FAILOVER_MS value;
 *   postgres cut at a TCP proxy for BENCH_PG_OUTAGE_MS, per BENCH_PG_MODES; rolling SIGTERM to A, a new A, then B.
 * Environment (defaults in brackets): BENCH_SCENARIOS [redis,kill,postgres,rolling]
 *   BENCH_DATABASE_URL [postgres://postgres@127.0.0.1:5432/test]  BENCH_ENGINE HTTP_ENGINE [auto]
 *   BENCH_CONVERSATIONS [16]  BENCH_THINK_MS between a conversation's rounds [300]
 *   BENCH_REPLY_CHUNKS [8]  BENCH_CHUNK_DELAY_MS [25]  BENCH_READ_RATE REST reads/s per process [10]
 *   BENCH_REQUEST_TIMEOUT_MS [30000]  BENCH_WARMUP_MS [4000]  BENCH_AFTER_MS [4000]
 *   BENCH_RECOVERY_CAP_MS [40000]  BENCH_SOCKET_GRACE_MS a socket must get a reply this long after its 200 [1500]
 *   BENCH_FAILOVER_MS [5000,2000]  BENCH_PG_MODES [reset,blackhole]  BENCH_PG_OUTAGE_MS [8000]
 *   BENCH_ROLLING_SETTLE_MS [3000]  BENCH_MAX_RUN_SEC [600]
 * Writes loadtest/results/outages-<stamp>.{json,md}; a scenario with a timeout or a lost, duplicated
 * or reordered message keeps its Troupe logs in loadtest/results/outages-<stamp>-logs/.
 */
import { join } from 'node:path';
import { gitState, machine, runBench } from './support/children.ts';
import { envDatabaseUrl, envList, envNumber, envRates, envText, redactUrl } from './support/env.ts';
import { RESULTS_DIR, writeResults } from './support/report.ts';
import { markdown, type ScenarioResult } from './outage-support/report.ts';
import { postgresOutage, processKill, redisRestart, rollingRestart } from './outage-support/scenarios.ts';

const scenarios = envList('BENCH_SCENARIOS', ['redis', 'kill', 'postgres', 'rolling'] as const);
const settings = {
  databaseUrl: envDatabaseUrl(),
  engine: envText('BENCH_ENGINE') ?? 'auto',
  conversations: envNumber('BENCH_CONVERSATIONS', 16, 1),
  thinkMs: envNumber('BENCH_THINK_MS', 300, 0),
  replyChunks: envNumber('BENCH_REPLY_CHUNKS', 8, 2),
  chunkDelayMs: envNumber('BENCH_CHUNK_DELAY_MS', 25, 0),
  readRate: envNumber('BENCH_READ_RATE', 10, 0),
  requestTimeoutMs: envNumber('BENCH_REQUEST_TIMEOUT_MS', 30_000, 100),
  warmupMs: envNumber('BENCH_WARMUP_MS', 4_000, 0),
  afterMs: envNumber('BENCH_AFTER_MS', 4_000, 0),
  recoveryCapMs: envNumber('BENCH_RECOVERY_CAP_MS', 40_000, 1_000),
  socketGraceMs: envNumber('BENCH_SOCKET_GRACE_MS', 1_500, 0),
  pgOutageMs: envNumber('BENCH_PG_OUTAGE_MS', 8_000, 100),
  rollingSettleMs: envNumber('BENCH_ROLLING_SETTLE_MS', 3_000, 0),
  logDir: RESULTS_DIR,
};
export type Settings = typeof settings;
const failovers = envRates('BENCH_FAILOVER_MS', '5000,2000').sort((a, b) => b - a);
const pgModes = envList('BENCH_PG_MODES', ['reset', 'blackhole'] as const);

runBench('bench:outages', envNumber('BENCH_MAX_RUN_SEC', 600, 30) * 1000, async ({ stamp, started, log }) => {
  settings.logDir = join(settings.logDir, `outages-${stamp}-logs`);
  const results: ScenarioResult[] = [];
  const failures: { scenario: string; error: string }[] = [];
  const attempt = async (name: string, run: () => Promise<ScenarioResult>) => {
    try {
      results.push(await run());
    } catch (err) {
      // One broken scenario still leaves the others' numbers; it is reported, and the exit code says so.
      log(`${name} failed: ${(err as Error).stack ?? String(err)}`);
      failures.push({ scenario: name, error: String((err as Error).message ?? err) });
    }
  };
  for (const name of scenarios) {
    if (name === 'redis') await attempt('redis', () => redisRestart(settings, log));
    if (name === 'kill') for (const ms of failovers) await attempt(`kill ${ms}`, () => processKill(settings, log, ms));
    if (name === 'postgres') for (const mode of pgModes) await attempt(`postgres ${mode}`, () => postgresOutage(settings, log, mode));
    if (name === 'rolling') await attempt('rolling', () => rollingRestart(settings, log));
  }
  const host = machine();
  const s = settings;
  const report = `${markdown(results)}\n\n${results[0]?.engine ?? '?'} engine; ${s.conversations} conversations, ` +
    `${s.replyChunks} chunks × ${s.chunkDelayMs} ms per reply, ${s.thinkMs} ms between rounds, ${s.readRate} reads/s per process; ` +
    `${host.cpus} CPUs (${host.cpuModel}), ` +
    `node ${host.node}; ${Math.round((Date.now() - started) / 1000)} s in all.`;
  process.stdout.write(`\n${report}\n`);
  for (const f of failures) process.stdout.write(`\nFAILED: ${f.scenario}: ${f.error}\n`);
  for (const r of results) {
    const odd = r.incidents.map((i) => `${i.tag} via ${i.node}: ${i.answer} after ${i.tookMs} ms, sent ${i.sentMs} ms after the fault; ` +
      `${i.stored ? (i.answered ? 'stored and answered' : 'stored, unanswered') : 'not stored'}`);
    const excerpts = r.history.excerpts.map((e) => `conversation ${e.conv} from message #${e.at}: ${e.messages.join(' | ')}`);
    const examples = [...r.history.examples, ...excerpts, ...r.sockets.examples, ...odd, ...r.logFiles.map((f) => `Troupe log kept: ${f}`)];
    if (examples.length) process.stdout.write(`\n${r.scenario}, examples:\n${examples.map((e) => `  - ${e}`).join('\n')}\n`);
  }
  const config = { ...settings, databaseUrl: redactUrl(settings.databaseUrl), scenarios, failovers, pgModes };
  const json = { benchmark: 'outages', stamp, config, machine: host, git: await gitState(), results, failures };
  const paths = await writeResults('outages', stamp, json, report);
  log(`wrote ${paths.json}`);
  process.exitCode = failures.length > 0 ? 1 : 0;
});
