import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config.ts';

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
    // Asynchronous writes: lines that arrive while a write is in flight go out together, instead
    // of a blocking syscall per line (the largest cost of the request hot path). Nothing is held
    // back when idle, and pino flushes when the process exits.
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
