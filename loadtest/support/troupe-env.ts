/** Every variable Troupe's config reads: a Troupe child gets only the ones a benchmark sets. */
const TROUPE_VARS = [
  'PORT', 'HOST', 'HTTP_ENGINE', 'DATABASE_URL', 'DATABASE_POOL_SIZE', 'REDIS_URL', 'PUBLIC_ADDRESS', 'TROUPE_DATA_DIR',
  'TROUPE_BOOTSTRAP_KEY', 'TROUPE_ADMIN_TOKEN', 'LOG_LEVEL', 'MAX_JSON_BODY_BYTES', 'CORS_ORIGINS', 'SHUTDOWN_GRACE_MS',
  'CACHE_MAX_ENTRIES', 'METRICS_PUBLIC', 'TROUPE_URL', 'INFERENCE_BASE_URL', 'INFERENCE_API_KEY', 'INFERENCE_MODEL',
  'INFERENCE_CONNECT_TIMEOUT_MS', 'INFERENCE_FIRST_TOKEN_TIMEOUT_MS', 'INFERENCE_TOTAL_TIMEOUT_MS', 'INFERENCE_MAX_RETRIES',
  'INFERENCE_MODELS_TTL_MS', 'WEBHOOK_TIMEOUT_MS', 'WEBHOOK_ALLOW_PRIVATE', 'CAPABILITY_RESULT_TIMEOUT_MS', 'CAPABILITY_MAX_ROUNDS',
  'CONVERSATION_HISTORY_TOKENS', 'CONVERSATION_IDLE_MS',
];

/** This process's environment without any Troupe setting, plus `settings`. */
export function troupeEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of TROUPE_VARS) delete env[name];
  return Object.assign(env, settings);
}
