import { z } from 'zod';
import type { CapabilityConfig, DocumentConfig, EmbeddingsConfig, InferenceConfig, LiveKitConfig, SpeechConfig } from './config-sections.ts';

export type { CapabilityConfig, DocumentConfig, EmbeddingsConfig, InferenceConfig, LiveKitConfig, SpeechConfig } from './config-sections.ts';

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
    /** How long opening a PostgreSQL connection may take; past it requests answer 503 database_unavailable. */
    DATABASE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(2_000),
    /** How long a query may wait for a free PostgreSQL connection; past it the request answers 503 database_unavailable. */
    DATABASE_ACQUIRE_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(2_000),
    /** Server-side cap on one SQL statement (PostgreSQL's statement_timeout). */
    DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
    /** Redis connection string: set it on every process to share conversation actors between them. */
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
      .optional(),
    /** How long one Redis command may take; past it the request answers 503 redis_unavailable. */
    REDIS_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(2_000),
    /** How soon a conversation whose process died is taken over by another (each process keeps a heartbeat of half this TTL in Redis). */
    ACTOR_FAILOVER_MS: z.coerce.number().int().min(1_000).max(600_000).default(5_000),
    /** `host:port` where game clients reach this process (Colyseus seat reservations; with REDIS_URL). */
    PUBLIC_ADDRESS: z
      .string()
      .regex(/^[A-Za-z0-9.:[\]-]+(:\d{1,5})?(\/[A-Za-z0-9._~/-]*)?$/, 'must be host:port, optionally with a path prefix')
      .optional(),
    /** A conversation actor with no work and no game clients is disposed after this long. */
    CONVERSATION_IDLE_MS: z.coerce.number().int().min(100).max(86_400_000).default(60_000),
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
    /** OpenAI-compatible inference server, as the openai SDK's baseURL (e.g. http://localhost:11434/v1). */
    INFERENCE_BASE_URL: z.url().optional(),
    /** Key sent to the inference server; many local servers accept anything. */
    INFERENCE_API_KEY: z.string().min(1).optional(),
    /** Model characters use when they answer. */
    INFERENCE_MODEL: z.string().min(1).optional(),
    /** Time allowed for the upstream to answer with response headers, in ms. */
    INFERENCE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
    /** Time allowed from sending the request to the first streamed token, in ms. */
    INFERENCE_FIRST_TOKEN_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
    /** Time allowed for a whole completion, in ms. */
    INFERENCE_TOTAL_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(300_000),
    /** Retries of an upstream call that failed before any byte reached our client. */
    INFERENCE_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
    /** How long the upstream's model list is cached, in ms. */
    INFERENCE_MODELS_TTL_MS: z.coerce.number().int().min(0).max(86_400_000).default(60_000),
    /** Time a capability webhook has to answer, in ms. */
    WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
    /** Allow capability webhooks on loopback and private networks (e.g. a game server next door). */
    WEBHOOK_ALLOW_PRIVATE: boolFromEnv.default(false),
    /** How long a WebSocket conversation waits for a client_function_call result, in ms. */
    CAPABILITY_RESULT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
    /** Model rounds per reply when capability results are fed back. */
    CAPABILITY_MAX_ROUNDS: z.coerce.number().int().min(1).max(16).default(4),
    /** Approximate tokens of conversation history sent with each reply (about 4 characters a token). */
    CONVERSATION_HISTORY_TOKENS: z.coerce.number().int().min(100).max(1_000_000).default(6_000),
    /** Documents this process parses and embeds at once. */
    DOCUMENT_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
    /** A document's claim lasts this long without renewal; a dead process's documents are retaken after it. */
    DOCUMENT_LEASE_MS: z.coerce.number().int().min(500).max(3_600_000).default(30_000),
    /** How often each process looks for pending documents it was not woken for. */
    DOCUMENT_POLL_MS: z.coerce.number().int().min(100).max(600_000).default(2_000),
    /** Processing runs (interrupted by dying processes or a database that stopped answering) before a document fails. */
    DOCUMENT_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(3),
    /** Time and memory caps of one parse in the worker pool. */
    DOCUMENT_PARSE_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(120_000),
    DOCUMENT_PARSE_MEMORY_MB: z.coerce.number().int().min(64).max(16_384).default(512),
    DOCUMENT_MAX_PAGES: z.coerce.number().int().min(1).max(100_000).default(2_000),
    DOCUMENT_MAX_PIXELS: z.coerce.number().int().min(1).max(1_000_000_000).default(40_000_000),
    /** Chunk size and overlap, in tokens (about 4 characters each). */
    CHUNK_TOKENS: z.coerce.number().int().min(32).max(8_192).default(400),
    CHUNK_OVERLAP_TOKENS: z.coerce.number().int().min(0).max(4_096).default(60),
    /** Chunks retrieved per reply, and the tokens of document text a reply's prompt may carry. */
    RETRIEVAL_TOP_K: z.coerce.number().int().min(1).max(100).default(6),
    RETRIEVAL_TOKENS: z.coerce.number().int().min(50).max(100_000).default(1_500),
    /** OpenAI-compatible server for document embeddings; defaults to INFERENCE_BASE_URL. */
    EMBEDDINGS_BASE_URL: z.url().optional(),
    /** Key sent to the embeddings server; defaults to INFERENCE_API_KEY when the URL defaults too. */
    EMBEDDINGS_API_KEY: z.string().min(1).optional(),
    /** Embedding model; unset means documents are searched by full text only. */
    EMBEDDINGS_MODEL: z.string().min(1).optional(),
    /** Sent as `dimensions` (models that can shorten their vectors); also sizes the IVFFlat index. */
    EMBEDDINGS_DIMENSIONS: z.coerce.number().int().min(1).max(16_000).optional(),
    /** Texts sent in one embeddings request. */
    EMBEDDINGS_BATCH_SIZE: z.coerce.number().int().min(1).max(2048).default(64),
    /** LiveKit server game clients join voice rooms on (ws:// or wss://); its API is the same host over http(s)://. */
    LIVEKIT_URL: z
      .string()
      .regex(/^wss?:\/\/[^\s/?#]+(\/\S*)?$/, 'must be a ws:// or wss:// URL (what clients connect to, e.g. wss://livekit.example.com)')
      .optional(),
    /** API key and secret of that LiveKit server: they sign join tokens and server calls, and verify its webhooks. */
    LIVEKIT_API_KEY: z.string().min(1).optional(),
    LIVEKIT_API_SECRET: z.string().min(1).optional(),
    /** Name the character agent worker registers with LiveKit; rooms dispatch it explicitly by this name. */
    LIVEKIT_AGENT_NAME: z.string().min(1).max(128).default('troupe-character'),
    /** `auto`: `npm start` also runs the voice agent worker (`npm run agent`) when LiveKit is configured; `off`: run it yourself. */
    ROOM_AGENTS: z.enum(['auto', 'off']).default('auto'),
    /** Where voice agents reach Troupe's room WebSocket; default http://127.0.0.1:PORT (the worker `npm start` runs is told). */
    AGENT_TROUPE_URL: z.url().optional(),
    /** How long a voice-room join token stays valid, in seconds. */
    ROOM_TOKEN_TTL_S: z.coerce.number().int().min(60).max(86_400).default(3_600),
    /** In a room, how many times characters may answer each other (after the one that answered a player) before the floor returns to the players (0: characters answer players only). */
    ROOM_MAX_AGENT_TURNS: z.coerce.number().int().min(0).max(10).default(2),
    /** OpenAI-compatible speech-to-text server (/audio/transcriptions) and its key; default INFERENCE_BASE_URL, and INFERENCE_API_KEY only while the URL defaults too. */
    STT_BASE_URL: z.url().optional(),
    STT_API_KEY: z.string().min(1).optional(),
    /** Speech-to-text model (e.g. whisper-1); voice agents need it. */
    STT_MODEL: z.string().min(1).optional(),
    /** OpenAI-compatible text-to-speech server (/audio/speech, PCM at 24 kHz) and its key; defaults as for STT_. */
    TTS_BASE_URL: z.url().optional(),
    TTS_API_KEY: z.string().min(1).optional(),
    /** Text-to-speech model (e.g. gpt-4o-mini-tts); voice agents need it. */
    TTS_MODEL: z.string().min(1).optional(),
    /** Voice of characters without a voiceId (a voiceId picks the voice; voiceDescription is sent as instructions). */
    TTS_VOICE: z.string().min(1).max(200).default('alloy'),
  })
  .superRefine((env, ctx) => {
    // Servers that default to the inference server need one of the two once their model is set.
    for (const [kind, what] of [['EMBEDDINGS', '/embeddings'], ['STT', '/audio/transcriptions'], ['TTS', '/audio/speech']] as const) {
      if (env[`${kind}_MODEL`] && !env[`${kind}_BASE_URL`] && !env.INFERENCE_BASE_URL) {
        const message = `is not set but ${kind}_MODEL is; set it (or INFERENCE_BASE_URL) to the OpenAI-compatible server that serves ${what}`;
        ctx.addIssue({ code: 'custom', path: [`${kind}_BASE_URL`], message });
      }
    }
    if (env.INFERENCE_MODEL && !env.INFERENCE_BASE_URL) {
      ctx.addIssue({
        code: 'custom',
        path: ['INFERENCE_BASE_URL'],
        message: 'is not set but INFERENCE_MODEL is; set the URL of the OpenAI-compatible server (e.g. http://localhost:11434/v1)',
      });
    }
    const livekit = { LIVEKIT_URL: env.LIVEKIT_URL, LIVEKIT_API_KEY: env.LIVEKIT_API_KEY, LIVEKIT_API_SECRET: env.LIVEKIT_API_SECRET };
    const livekitMissing = Object.entries(livekit).filter(([, v]) => v === undefined).map(([k]) => k);
    // Half a LiveKit setup is a mistake worth stopping for; none at all just means no voice rooms.
    if (livekitMissing.length > 0 && livekitMissing.length < 3) {
      ctx.addIssue({
        code: 'custom',
        path: [livekitMissing[0] ?? 'LIVEKIT_URL'],
        message: `is not set but other LIVEKIT_ variables are; voice rooms need LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET together (missing: ${livekitMissing.join(', ')})`,
      });
    }
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
  databaseConnectTimeoutMs: number;
  databaseAcquireTimeoutMs: number;
  databaseStatementTimeoutMs: number;
  redisUrl: string | undefined;
  redisCommandTimeoutMs: number;
  actorFailoverMs: number;
  publicAddress: string | undefined;
  conversationIdleMs: number;
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
  inference: InferenceConfig;
  capabilities: CapabilityConfig;
  conversationHistoryTokens: number;
  documents: DocumentConfig;
  embeddings: EmbeddingsConfig;
  livekit: LiveKitConfig;
  /** Character turns that may follow another character's turn in a voice room before a player speaks again. */
  roomMaxAgentTurns: number;
  speech: SpeechConfig;
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
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS,
    databaseAcquireTimeoutMs: e.DATABASE_ACQUIRE_TIMEOUT_MS,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    redisUrl: e.REDIS_URL,
    redisCommandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS,
    actorFailoverMs: e.ACTOR_FAILOVER_MS,
    publicAddress: e.PUBLIC_ADDRESS,
    conversationIdleMs: e.CONVERSATION_IDLE_MS,
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
    inference: {
      baseUrl: e.INFERENCE_BASE_URL,
      apiKey: e.INFERENCE_API_KEY,
      model: e.INFERENCE_MODEL,
      connectTimeoutMs: e.INFERENCE_CONNECT_TIMEOUT_MS,
      firstTokenTimeoutMs: e.INFERENCE_FIRST_TOKEN_TIMEOUT_MS,
      totalTimeoutMs: e.INFERENCE_TOTAL_TIMEOUT_MS,
      maxRetries: e.INFERENCE_MAX_RETRIES,
      modelsTtlMs: e.INFERENCE_MODELS_TTL_MS,
    },
    capabilities: {
      webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
      webhookAllowPrivate: e.WEBHOOK_ALLOW_PRIVATE,
      resultTimeoutMs: e.CAPABILITY_RESULT_TIMEOUT_MS,
      maxRounds: e.CAPABILITY_MAX_ROUNDS,
    },
    conversationHistoryTokens: e.CONVERSATION_HISTORY_TOKENS,
    documents: {
      concurrency: e.DOCUMENT_CONCURRENCY,
      leaseMs: e.DOCUMENT_LEASE_MS,
      pollMs: e.DOCUMENT_POLL_MS,
      maxAttempts: e.DOCUMENT_MAX_ATTEMPTS,
      parseTimeoutMs: e.DOCUMENT_PARSE_TIMEOUT_MS,
      parseMemoryMb: e.DOCUMENT_PARSE_MEMORY_MB,
      maxPages: e.DOCUMENT_MAX_PAGES,
      maxPixels: e.DOCUMENT_MAX_PIXELS,
      chunkTokens: e.CHUNK_TOKENS,
      chunkOverlapTokens: e.CHUNK_OVERLAP_TOKENS,
      retrievalTopK: e.RETRIEVAL_TOP_K,
      retrievalTokens: e.RETRIEVAL_TOKENS,
    },
    embeddings: {
      baseUrl: e.EMBEDDINGS_BASE_URL ?? e.INFERENCE_BASE_URL,
      // The inference key goes only to the inference server, never to another embeddings host.
      apiKey: e.EMBEDDINGS_API_KEY ?? (e.EMBEDDINGS_BASE_URL ? undefined : e.INFERENCE_API_KEY),
      model: e.EMBEDDINGS_MODEL,
      dimensions: e.EMBEDDINGS_DIMENSIONS,
      batchSize: e.EMBEDDINGS_BATCH_SIZE,
    },
    livekit: {
      url: e.LIVEKIT_URL,
      apiKey: e.LIVEKIT_API_KEY,
      apiSecret: e.LIVEKIT_API_SECRET,
      agentName: e.LIVEKIT_AGENT_NAME,
      tokenTtlS: e.ROOM_TOKEN_TTL_S,
      agents: e.ROOM_AGENTS,
      troupeUrl: e.AGENT_TROUPE_URL ?? `http://127.0.0.1:${e.PORT}`,
    },
    roomMaxAgentTurns: e.ROOM_MAX_AGENT_TURNS,
    speech: {
      // As with embeddings, the inference key goes only to the inference server.
      stt: { baseUrl: e.STT_BASE_URL ?? e.INFERENCE_BASE_URL, apiKey: e.STT_API_KEY ?? (e.STT_BASE_URL ? undefined : e.INFERENCE_API_KEY), model: e.STT_MODEL },
      tts: { baseUrl: e.TTS_BASE_URL ?? e.INFERENCE_BASE_URL, apiKey: e.TTS_API_KEY ?? (e.TTS_BASE_URL ? undefined : e.INFERENCE_API_KEY), model: e.TTS_MODEL, voice: e.TTS_VOICE },
      connectTimeoutMs: e.INFERENCE_CONNECT_TIMEOUT_MS,
      totalTimeoutMs: e.INFERENCE_TOTAL_TIMEOUT_MS,
      maxRetries: e.INFERENCE_MAX_RETRIES,
    },
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
