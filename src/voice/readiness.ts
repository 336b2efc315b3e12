import type { Config } from '../config.ts';
import { createLogger } from '../observability/logger.ts';
import { SpeechClient } from './speech.ts';

/**
 * What stops voice agents from serving rooms, named by variable; empty when they can. Said when
 * the worker starts and in `/readyz`, never first at a player's first utterance.
 */
export function voiceProblems(config: Config): string[] {
  const problems: string[] = [];
  const { url, apiKey, apiSecret } = config.livekit;
  const missing = [!url && 'LIVEKIT_URL', !apiKey && 'LIVEKIT_API_KEY', !apiSecret && 'LIVEKIT_API_SECRET'].filter((v): v is string => typeof v === 'string');
  if (missing.length > 0) problems.push(`voice rooms need ${missing.join(', ')}`);
  problems.push(...new SpeechClient({ config: config.speech, logger: createLogger('silent') }).problems());
  return problems;
}
