import { fileURLToPath } from 'node:url';
import { AgentServer, type JobRequest, ServerOptions, initializeLogger } from '@livekit/agents';
import { type Config, ConfigError, loadConfig } from '../config.ts';
import { createLogger } from '../observability/logger.ts';
import { RTC_IDENTITY_PREFIX } from '../rooms/service.ts';
import type { DispatchMetadata } from '../rooms/voice-control.ts';
import { voiceProblems } from './readiness.ts';

/** The job file agents-js imports in each job's process. */
const AGENT_JOB = fileURLToPath(new URL('./agent-job.ts', import.meta.url));

/**
 * Accepts a dispatch as its character: identity `agent-<characterId>` (the identity Troupe gives
 * the participant), with the character's name. A job without Troupe's metadata is not ours.
 */
export async function acceptJob(request: JobRequest): Promise<void> {
  let meta: Partial<DispatchMetadata> = {};
  try {
    meta = JSON.parse(request.job.metadata) as Partial<DispatchMetadata>;
  } catch {
    // handled below
  }
  if (typeof meta.characterId !== 'string' || typeof meta.roomId !== 'string' || typeof meta.projectId !== 'string') {
    await request.reject();
    return;
  }
  await request.accept(meta.characterName ?? meta.characterId, `${RTC_IDENTITY_PREFIX}${meta.characterId}`);
}

/** `npm run agent`: registers with LiveKit under LIVEKIT_AGENT_NAME, for explicit dispatch only. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exitCode = 1;
    return;
  }
  const logger = createLogger(config.logLevel);
  const problems = voiceProblems(config);
  if (problems.length > 0) {
    // Said at start, not at the first utterance: without these no room can be voiced.
    logger.error({ problems }, `the voice agent worker cannot start: ${problems.join('; ')}`);
    logger.flush();
    process.exitCode = 1;
    return;
  }
  const { url, apiKey, apiSecret, agentName } = config.livekit;
  initializeLogger({ pretty: false, level: config.logLevel === 'silent' ? 'fatal' : config.logLevel });
  const server = new AgentServer(
    new ServerOptions({
      agent: AGENT_JOB,
      agentName,
      requestFunc: acceptJob,
      wsURL: url as string,
      apiKey: apiKey as string,
      apiSecret: apiSecret as string,
      production: true,
      logLevel: config.logLevel,
      // Its health endpoint is not ours to expose; 0 picks any free port.
      port: 0,
    }),
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'voice agent worker stopping: finishing its jobs');
    void server
      .drain(config.shutdownGraceMs)
      .catch((err: unknown) => logger.warn({ err }, 'voice agent worker did not drain in time'))
      .then(() => server.close())
      .finally(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  logger.info({ agentName, livekit: url, troupe: config.livekit.troupeUrl }, 'voice agent worker registering with LiveKit');
  await server.run();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: unknown) => {
    process.stderr.write(`voice agent worker failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  });
}
