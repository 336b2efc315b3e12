import { z } from 'zod';

/**
 * Every setting Troupe reads from the environment. `loadConfig(env)` is the only place that
 * looks at environment variables; everything else receives the parsed `Config`.
 */
const boolFromEnv = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const ConfigSchema = z
  .object({
    /** TCP port to listen on; 0 picks a free one (tests). */
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    /** Interface to bind. */
    HOST: z.string().min(1).default('0.0.0.0'),
    /** `auto` prefers uWebSockets.js and falls back to node:http when its binary cannot load. */
    HTTP_ENGINE: z.enum(['auto', 'uws', 'node']).default('auto'),
    /** PostgreSQL connection string; absent means embedded PGlite under TROUPE_DATA_DIR. */
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
      .optional(),
    /** Maximum PostgreSQL connections per process (postgres.js pool). */
    DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(10),
    /** Redis connection string; optional until the actor layer uses it for scale-out. */
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
      .optional(),
    /** Where embedded data (PGlite) lives. `memory://` keeps it in memory only. */
    TROUPE_DATA_DIR: z.string().min(1).default('./.troupe'),
    /** Ensures a project `default` holding this key at startup. */
    TROUPE_BOOTSTRAP_KEY: z
      .string()
      .regex(/^sk-troupe-[A-Za-z0-9_-]{16,200}$/, 'must look like sk-troupe-<at least 16 letters, digits, _ or ->')
      .optional(),
    /** Enables the /admin API; callers send it as a Bearer token. */
    TROUPE_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    /** Logs at this level and above. */
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** Largest JSON request body accepted, in bytes. */
    MAX_JSON_BODY_BYTES: z.coerce.number().int().min(1024).max(64 * 1024 * 1024).default(1024 * 1024),
    /** Comma-separated allowed CORS origins, or `*`; empty disables CORS headers. */
    CORS_ORIGINS: z.string().default(''),
    /** How long shutdown waits for in-flight requests before closing connections, in ms. */
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
    /** Entries kept in each in-process read cache (characters, API keys). */
    CACHE_MAX_ENTRIES: z.coerce.number().int().min(0).max(10_000_000).default(50_000),
    /** `/metrics` is open when true; otherwise it needs TROUPE_ADMIN_TOKEN as Bearer token. */
    METRICS_PUBLIC: boolFromEnv.default(true),
    /** Base URL the `troupe` CLI talks to. */
    TROUPE_URL: z.url().optional(),
  })
  .superRefine((env, ctx) => {
    if (!env.METRICS_PUBLIC && !env.TROUPE_ADMIN_TOKEN) {
      ctx.addIssue({
        code: 'custom',
        path: ['METRICS_PUBLIC'],
        message: 'is false but TROUPE_ADMIN_TOKEN is not set, so nobody could read /metrics; set TROUPE_ADMIN_TOKEN',
      });
    }
  });

export type EnvInput = Readonly<Record<string, string | undefined>>;

export interface Config {
  port: number;
  host: string;
  httpEngine: 'auto' | 'uws' | 'node';
  databaseUrl: string | undefined;
  databasePoolSize: number;
  redisUrl: string | undefined;
  dataDir: string;
  bootstrapKey: string | undefined;
  adminToken: string | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  maxJsonBodyBytes: number;
  corsOrigins: '*' | readonly string[];
  shutdownGraceMs: number;
  cacheMaxEntries: number;
  metricsPublic: boolean;
  cliUrl: string | undefined;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment once at startup. Empty strings count as unset. */
export function loadConfig(env: EnvInput): Config {
  const cleaned: Record<string, string> = {};
  for (const key of Object.keys(ConfigSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value.trim() !== '') cleaned[key] = value.trim();
  }
  const parsed = ConfigSchema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const name = String(issue.path[0] ?? 'environment');
      return `${name}: ${issue.message}`;
    });
    throw new ConfigError(`Invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    httpEngine: e.HTTP_ENGINE,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL,
    dataDir: e.TROUPE_DATA_DIR,
    bootstrapKey: e.TROUPE_BOOTSTRAP_KEY,
    adminToken: e.TROUPE_ADMIN_TOKEN,
    logLevel: e.LOG_LEVEL,
    maxJsonBodyBytes: e.MAX_JSON_BODY_BYTES,
    corsOrigins: parseOrigins(e.CORS_ORIGINS),
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    cacheMaxEntries: e.CACHE_MAX_ENTRIES,
    metricsPublic: e.METRICS_PUBLIC,
    cliUrl: e.TROUPE_URL,
  };
}

function parseOrigins(raw: string): '*' | readonly string[] {
  if (raw === '*') return '*';
  return raw
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o.length > 0);
}

/** The documented variables, for the README and `troupe --help`. */
export const CONFIG_VARIABLES = Object.keys(ConfigSchema.shape);
