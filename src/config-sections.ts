// The typed sections of `Config` (see config.ts, which parses the environment into them).

/** Voice agents' speech servers; calls use the INFERENCE_ timeouts and retries (separate knobs would be tuned alike). */
export interface SpeechConfig {
  stt: { baseUrl: string | undefined; apiKey: string | undefined; model: string | undefined };
  tts: { baseUrl: string | undefined; apiKey: string | undefined; model: string | undefined; voice: string };
  connectTimeoutMs: number;
  totalTimeoutMs: number;
  maxRetries: number;
}

/** Voice rooms' LiveKit server; url, apiKey and apiSecret are all set or all undefined. */
export interface LiveKitConfig {
  /** ws:// or wss:// URL clients connect to. */
  url: string | undefined;
  apiKey: string | undefined;
  apiSecret: string | undefined;
  agentName: string;
  tokenTtlS: number;
  agents: 'auto' | 'off';
  troupeUrl: string;
}

export interface EmbeddingsConfig {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  model: string | undefined;
  dimensions: number | undefined;
  batchSize: number;
}

export interface DocumentConfig {
  concurrency: number;
  leaseMs: number;
  pollMs: number;
  maxAttempts: number;
  parseTimeoutMs: number;
  parseMemoryMb: number;
  maxPages: number;
  maxPixels: number;
  chunkTokens: number;
  chunkOverlapTokens: number;
  retrievalTopK: number;
  retrievalTokens: number;
}

export interface CapabilityConfig {
  webhookTimeoutMs: number;
  webhookAllowPrivate: boolean;
  resultTimeoutMs: number;
  maxRounds: number;
}

export interface InferenceConfig {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  model: string | undefined;
  connectTimeoutMs: number;
  firstTokenTimeoutMs: number;
  totalTimeoutMs: number;
  maxRetries: number;
  modelsTtlMs: number;
}
