import { CONFIG_VARIABLES } from '../../src/config.ts';

/** This process's environment without any Troupe setting, plus `settings`: a child gets only what a benchmark sets. */
export function troupeEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CONFIG_VARIABLES) delete env[name];
  return Object.assign(env, settings);
}
