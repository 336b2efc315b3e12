import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config.ts';
import { createLogDestination, type LogDestination } from './log-destination.ts';

let stdout: LogDestination | null = null;

/** One batched writer for the process's stdout, flushed when the process exits. */
function stdoutDestination(): LogDestination {
  if (!stdout) {
    const destination = createLogDestination(1);
    process.once('exit', () => destination.flushSync());
    stdout = destination;
  }
  return stdout;
}

/**
 * JSON logs with static messages and data in fields. Credentials never reach a log line: the
 * request log records no headers, and fields named like credentials are redacted.
 */
export function createLogger(level: Config['logLevel'], destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'troupe' },
      redact: {
        // Top-level paths only: wildcards make redaction walk every line (seen in the profile),
        // and nothing logs nested objects that could hold credentials.
        paths: ['authorization', 'key', 'token', 'apiKey', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    // Batched writes (log-destination.ts): a write per line cost more than a small request.
    destination ?? stdoutDestination(),
  );
}
