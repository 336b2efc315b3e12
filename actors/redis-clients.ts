import { format } from 'node:util';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * Redis connections of the actor runtime, made here rather than by Colyseus so that a Redis
 * outage gives bounded, logged failures: a command fails after `commandTimeoutMs` or one
 * reconnect attempt instead of queueing for the whole outage, and connection errors become one
 * JSON log line each time the state changes, not "[ioredis] Unhandled error event" on stderr.
 */
export function redisClient(url: string, logger: Logger, role: string, commandTimeoutMs: number, onRestored?: () => void): Redis {
  const client = new Redis(url, {
    commandTimeout: commandTimeoutMs,
    maxRetriesPerRequest: 1,
    // Reconnect quickly and keep trying: the outage ends when Redis is back, not when we give up.
    retryStrategy: (attempt) => Math.min(100 * attempt, 1_000),
  });
  let down = false;
  let logged = false;
  client.on('error', (err: Error) => {
    down = true;
    if (logged) return;
    logged = true;
    logger.warn({ err, redis: role }, 'redis connection lost');
  });
  // A restarted server may close the connection cleanly, with no error before it comes back.
  client.on('close', () => (down = true));
  client.on('ready', () => {
    if (!down) return;
    down = false;
    if (logged) logger.info({ redis: role }, 'redis connection restored');
    logged = false;
    onRestored?.();
  });
  return client;
}

/** Colyseus' own log lines, through the service's JSON logger. */
export function colyseusLogger(logger: Logger): Record<'debug' | 'error' | 'info' | 'trace' | 'warn', (...args: unknown[]) => void> {
  const line = (level: 'debug' | 'error' | 'info' | 'trace' | 'warn') => (...args: unknown[]) => logger[level]({ component: 'colyseus' }, format(...args));
  return { debug: line('debug'), error: line('error'), info: line('info'), trace: line('trace'), warn: line('warn') };
}
