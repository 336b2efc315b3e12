/**
 * The benchmark harness. A scenario (loadtest/<name>.ts) imports from here and stays short:
 *
 *   startRun(name, budgetMs)            Node check, children killed on any exit, a last-resort timer; gives the run's stamp.
 *   startTroupe({ engine, upstream?, settings?, nodeArgs?, logLevel? })
 *                                       Troupe (src/main.ts) as a child on 127.0.0.1 and a port of its own, in-memory
 *                                       database unless settings.DATABASE_URL; its environment is only what is passed
 *                                       (troupeEnv), never the developer's shell. Gives { child, key, base, auth }.
 *   createCharacter(troupe), callJson(troupe, method, path, body, status)
 *   launchUpstream({ loadtestDir, script: 'support/upstream-server.ts', env, readyMsg: UPSTREAM_READY_MSG, cwd })
 *                                       the one fake OpenAI-compatible upstream: BENCH_REPLY_TOKENS chunks
 *                                       BENCH_REPLY_GAP_MS apart, stamped streams for fan-out (upstream-reply.ts).
 *   launch({ name, command, args, env, cwd, readyMsg }) / spawnTracked(...)
 *                                       any other child (pipe proxy, bare servers), waited for on its ready line.
 *   runLoad(targets, { rate, warmupSec, durationSec, watch? })
 *                                       the open-loop generator: per target ttfc[], total[], errors, achieved req/s, CPU.
 *   requestOnce(target)                 one request with its body, for pre-flight checks.
 *   saturate({ url, connections, durationSec, headers })
 *                                       closed-loop autocannon, for throughput.
 *   processCpuSeconds(pid), startCpuWindow(watched)
 *                                       CPU of a process, and of everyone, over a window (from /proc).
 *   summarize(values)                   p50/p90/p99/p999/max of latency samples.
 *   writeResults(name, stamp, json, markdown), markdownTable(header, rows)
 *                                       the report writer: loadtest/results/<name>-<stamp>.{json,md}.
 *   newestProfile(dir), summarizeSrcProfile(file, window), formatSrcProfile(summary, label)
 *                                       top frames of a child run with --cpu-prof, over the measured window.
 *   envNumber / envList / envRates / envFlag / envText / envLogLevel
 *                                       BENCH_* settings, with the same errors everywhere.
 */
export { saturate, type SaturationStats } from './autocannon.ts';
export { launch, spawnTracked, delay, type Launched } from './children.ts';
export { processCpuSeconds, startCpuWindow, waitForQuiet, type CpuWindow, type WatchedProcess } from './cpu.ts';
export { envFlag, envList, envLogLevel, envNumber, envRates, envText } from './env.ts';
export { launchUpstream } from './fake-upstream.ts';
export { requestOnce, runLoad, type HttpTarget, type TargetRun } from './http-load.ts';
export { formatSrcProfile, newestProfile, summarizeSrcProfile } from './profile.ts';
export { markdownTable, ms, RESULTS_DIR, writeResults } from './results.ts';
export { gitState, machine, startRun, uwsEngineNode } from './run.ts';
export { percentile, summarize, type Summary } from './stats.ts';
export { callJson, createCharacter, ROOT, startTroupe, type Engine, type Troupe } from './troupe.ts';
export { troupeEnv } from './troupe-env.ts';
export { BENCH_MODEL, UPSTREAM_READY_MSG } from './upstream-reply.ts';
