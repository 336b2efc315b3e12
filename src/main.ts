import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './observability/logger.ts';
import { releaseStartupMemory } from './observability/startup-memory.ts';
import { preparePgliteDataDir } from './db/pglite-memory.ts';
import { startAgentWorker, type AgentWorkerProcess } from './voice/worker-process.ts';
import { voiceProblems } from './voice/readiness.ts';

/** Past the grace period, how long shutdown may still take before the process exits anyway. */
const SHUTDOWN_SLACK_MS = 3_000;

/** Composition root: config -> resources -> listen -> shutdown on signals. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  processLogger = logger;
  // A first start on PGlite creates its store (in a child process) before the server's modules
  // load, so the two start-up peaks never add up.
  if (!config.databaseUrl) await preparePgliteDataDir(config.dataDir);
  const { startServer } = await import('./server.ts');
  const server = await startServer(config, logger);

  if (server.initialKey) {
    // Printed once to the terminal, deliberately not through the logger: logs never hold keys.
    process.stdout.write(
      `\nNo API key existed, so Troupe created one for project 'default' (${server.initialKey.projectId}).\n` +
        `It is shown only now; keep it safe:\n\n  ${server.initialKey.key}\n\n`,
    );
  }

  // Before the line clients wait for, so the pause never lands on a request.
  const gcMs = releaseStartupMemory();
  if (gcMs === null) logger.warn('this Node offers no gc(): start-up garbage stays until V8 collects it');
  else logger.debug({ ms: Math.round(gcMs) }, 'start-up garbage released');

  // Last, so anything waiting for this line also sees the banner above.
  logger.info({ engine: server.engine, port: server.port, database: server.resources.database.kind }, 'troupe listening');

  // Voice rooms on one command: the agent worker runs beside the server (ROOM_AGENTS=auto).
  let agents: AgentWorkerProcess | null = null;
  if (config.livekit.agents === 'auto' && config.livekit.url) {
    const problems = voiceProblems(config);
    if (problems.length === 0) agents = startAgentWorker(process.env, server.url, logger);
    else logger.warn({ problems }, `voice agents not started: ${problems.join('; ')}`);
  }

  let signalled = false;
  const shutdown = (signal: string) => {
    if (signalled) return;
    signalled = true;
    logger.info({ signal }, 'shutting down');
    // Whatever still holds the event loop (a call to a process that died, a stuck client), the
    // process exits within the grace period plus a few seconds.
    setTimeout(() => {
      logger.error({ graceMs: config.shutdownGraceMs }, 'shutdown did not finish in time; exiting');
      logger.flush();
      process.exit(1);
    }, config.shutdownGraceMs + SHUTDOWN_SLACK_MS).unref();
    Promise.all([server.stop(), agents?.stop(config.shutdownGraceMs)]).then(
      () => {
        logger.flush();
        process.exitCode = 0;
        // Stopped: nothing left should keep the process, and nothing may.
        setTimeout(() => process.exit(), SHUTDOWN_SLACK_MS).unref();
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exitCode = 1;
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/** Set once the logger exists; until then failures go to stderr as text. */
let processLogger: ReturnType<typeof createLogger> | null = null;

process.on('uncaughtException', (err) => {
  // A bug: log it as JSON, then end as Node would have.
  if (processLogger) {
    processLogger.fatal({ err }, 'uncaught exception');
    processLogger.flush();
  } else {
    process.stderr.write(`uncaught exception: ${String((err as Error)?.stack ?? err)}\n`);
  }
  process.exit(1);
});

process.on('unhandledRejection', (reason) => {
  // Libraries (ioredis through Colyseus) may reject without a handler during an outage: log it
  // as one JSON line and keep serving; the failure itself was answered where it mattered.
  if (processLogger) processLogger.error({ err: reason }, 'unhandled rejection');
  else process.stderr.write(`unhandled rejection: ${String((reason as Error)?.stack ?? reason)}\n`);
});

await main();
