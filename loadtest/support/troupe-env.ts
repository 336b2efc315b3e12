/**
 * The whole environment of a benchmark child: the few variables a process needs to run (where
 * binaries and the home and temp folders are) plus what the benchmark sets. Nothing else is
 * inherited, so a developer's TROUPE_*, DATABASE_URL, REDIS_URL, OPENAI_* or LIVEKIT_* never
 * reaches a measured process by accident.
 */
const PASSED_THROUGH = ['PATH', 'HOME', 'TMPDIR', 'LANG'] as const;

export function troupeEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of PASSED_THROUGH) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return Object.assign(env, settings);
}
