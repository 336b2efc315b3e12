import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config.ts';

/**
 * JSON logs with static messages and data in fields. Credentials never reach a log line: the
 * request log records no headers, and these paths are redacted wherever they appear.
 */
export function createLogger(level: Config['logLevel'], destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'troupe' },
      redact: {
        paths: ['authorization', 'key', 'token', 'apiKey', '*.authorization', '*.key', '*.token', '*.apiKey', 'headers.authorization'],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
