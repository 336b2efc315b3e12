import type { Logger } from 'pino';
import type { HttpEngineOptions, HttpServer } from './types.ts';

type UwsModule = typeof import('./uws.ts'); // eslint-disable-line @typescript-eslint/consistent-type-imports -- loaded lazily: the native binary may not load

/**
 * Starts the configured engine. `auto` prefers uWebSockets.js and falls back to node:http with
 * one warning when its native binary cannot load (it needs glibc >= 2.38).
 */
export async function startHttpServer(
  engine: 'auto' | 'uws' | 'node',
  options: HttpEngineOptions,
  logger: Logger,
): Promise<HttpServer> {
  if (engine !== 'node') {
    let uws: UwsModule;
    try {
      uws = await import('./uws.ts');
    } catch (err) {
      if (engine === 'uws') {
        throw new Error(`HTTP_ENGINE=uws but uWebSockets.js cannot load here: ${(err as Error).message}`, { cause: err });
      }
      logger.warn(
        { reason: (err as Error).message.split('\n')[0] },
        'uWebSockets.js cannot load on this machine (it needs glibc >= 2.38); serving with node:http instead',
      );
      return (await import('./node.ts')).startNodeServer(options);
    }
    return uws.startUwsServer(options);
  }
  return (await import('./node.ts')).startNodeServer(options);
}
