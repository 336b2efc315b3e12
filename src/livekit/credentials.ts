import type { LiveKitConfig } from '../config.ts';
import { TroupeError } from '../errors.ts';

/** What every LiveKit call needs; present only when all three variables are set. */
export interface LiveKitCredentials {
  /** ws:// or wss:// URL clients connect to. */
  url: string;
  apiKey: string;
  apiSecret: string;
}

const VARIABLES = { url: 'LIVEKIT_URL', apiKey: 'LIVEKIT_API_KEY', apiSecret: 'LIVEKIT_API_SECRET' } as const;

/** The environment variables among `needed` that are not set. */
export function missingVariables(config: LiveKitConfig, needed: readonly (keyof typeof VARIABLES)[] = ['url', 'apiKey', 'apiSecret']): string[] {
  return needed.filter((field) => !config[field]).map((field) => VARIABLES[field]);
}

/** The 503 every LiveKit feature answers without its settings: nothing the caller can fix but the operator can. */
export function notConfigured(missing: readonly string[]): TroupeError {
  return new TroupeError('livekit_not_configured', `Voice rooms are not configured: set ${missing.join(', ')}.`);
}

/** LiveKit serves its API on the host clients connect to, over http(s) instead of ws(s). */
export function apiBaseUrl(url: string): string {
  return url.replace(/^ws(s?):\/\//, 'http$1://');
}
