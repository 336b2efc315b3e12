import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';

describe('loadConfig', () => {
  it('has embedded defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      httpEngine: 'auto',
      databaseUrl: undefined,
      redisUrl: undefined,
      dataDir: './.troupe',
      bootstrapKey: undefined,
      adminToken: undefined,
      logLevel: 'info',
      maxJsonBodyBytes: 1024 * 1024,
      corsOrigins: [],
      metricsPublic: true,
      livekit: { url: undefined, apiKey: undefined, apiSecret: undefined, agentName: 'troupe-character', tokenTtlS: 3600 },
      roomMaxAgentTurns: 2,
      speech: {
        stt: { baseUrl: undefined, apiKey: undefined, model: undefined },
        tts: { baseUrl: undefined, apiKey: undefined, model: undefined, voice: 'alloy' },
      },
    });
  });

  it('parses every documented variable', () => {
    const config = loadConfig({
      PORT: '9000',
      HOST: '127.0.0.1',
      HTTP_ENGINE: 'node',
      DATABASE_URL: 'postgres://u@db:5432/troupe',
      REDIS_URL: 'redis://cache:6379',
      TROUPE_DATA_DIR: '/var/lib/troupe',
      TROUPE_BOOTSTRAP_KEY: 'sk-troupe-abcdefghijklmnop',
      TROUPE_ADMIN_TOKEN: 'a-long-admin-token',
      LOG_LEVEL: 'debug',
      MAX_JSON_BODY_BYTES: '2048',
      CORS_ORIGINS: 'https://a.example, https://b.example',
      METRICS_PUBLIC: 'false',
    });
    expect(config).toMatchObject({
      port: 9000,
      httpEngine: 'node',
      databaseUrl: 'postgres://u@db:5432/troupe',
      redisUrl: 'redis://cache:6379',
      dataDir: '/var/lib/troupe',
      bootstrapKey: 'sk-troupe-abcdefghijklmnop',
      logLevel: 'debug',
      maxJsonBodyBytes: 2048,
      corsOrigins: ['https://a.example', 'https://b.example'],
      metricsPublic: false,
    });
    expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
  });

  it('parses the LiveKit settings of voice rooms', () => {
    const config = loadConfig({
      LIVEKIT_URL: 'wss://livekit.example.com',
      LIVEKIT_API_KEY: 'APIkey',
      LIVEKIT_API_SECRET: 'secret',
      LIVEKIT_AGENT_NAME: 'my-agent',
      ROOM_TOKEN_TTL_S: '600',
      ROOM_MAX_AGENT_TURNS: '0',
      PORT: '9090',
    });
    expect(config.livekit).toEqual({
      url: 'wss://livekit.example.com',
      apiKey: 'APIkey',
      apiSecret: 'secret',
      agentName: 'my-agent',
      tokenTtlS: 600,
      agents: 'auto',
      troupeUrl: 'http://127.0.0.1:9090',
    });
    expect(loadConfig({ ROOM_AGENTS: 'off', AGENT_TROUPE_URL: 'https://troupe.internal:8443' }).livekit).toMatchObject({ agents: 'off', troupeUrl: 'https://troupe.internal:8443' });
    expect(() => loadConfig({ ROOM_AGENTS: 'sometimes' })).toThrow(/ROOM_AGENTS/);
    expect(config.roomMaxAgentTurns).toBe(0);
    expect(loadConfig({ LIVEKIT_URL: 'ws://127.0.0.1:7880', LIVEKIT_API_KEY: 'k', LIVEKIT_API_SECRET: 's' }).livekit.url).toBe('ws://127.0.0.1:7880');
  });

  it('names the LiveKit variables missing from a partial setup', () => {
    expect(() => loadConfig({ LIVEKIT_URL: 'wss://livekit.example.com' })).toThrow(
      /^Invalid configuration:\n {2}LIVEKIT_API_KEY: .*\(missing: LIVEKIT_API_KEY, LIVEKIT_API_SECRET\)$/,
    );
  });

  it('treats empty values as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '  ' })).toMatchObject({ port: 8080, databaseUrl: undefined });
  });

  it('sends embeddings to the inference server unless told otherwise, and its key only there', () => {
    const inference = { INFERENCE_BASE_URL: 'http://llm:8000/v1', INFERENCE_API_KEY: 'inference-key' };
    expect(loadConfig({ ...inference, EMBEDDINGS_MODEL: 'embed-small' }).embeddings).toEqual({
      baseUrl: 'http://llm:8000/v1',
      apiKey: 'inference-key',
      model: 'embed-small',
      dimensions: undefined,
      batchSize: 64,
    });
    const elsewhere = loadConfig({ ...inference, EMBEDDINGS_BASE_URL: 'http://embed:9000/v1', EMBEDDINGS_DIMENSIONS: '256', EMBEDDINGS_BATCH_SIZE: '8' });
    expect(elsewhere.embeddings).toMatchObject({ baseUrl: 'http://embed:9000/v1', apiKey: undefined, model: undefined, dimensions: 256, batchSize: 8 });
  });

  it('sends speech to the inference server unless told otherwise, and its key only there', () => {
    const inference = { INFERENCE_BASE_URL: 'http://llm:8000/v1', INFERENCE_API_KEY: 'inference-key', INFERENCE_MAX_RETRIES: '0' };
    const same = loadConfig({ ...inference, STT_MODEL: 'whisper-1', TTS_MODEL: 'tts-1', TTS_VOICE: 'sage' });
    expect(same.speech).toMatchObject({
      stt: { baseUrl: 'http://llm:8000/v1', apiKey: 'inference-key', model: 'whisper-1' },
      tts: { baseUrl: 'http://llm:8000/v1', apiKey: 'inference-key', model: 'tts-1', voice: 'sage' },
      maxRetries: 0,
    });
    const elsewhere = loadConfig({ ...inference, STT_BASE_URL: 'http://stt:9000/v1', TTS_BASE_URL: 'http://tts:9001/v1', TTS_API_KEY: 'tts-key' });
    expect(elsewhere.speech.stt).toEqual({ baseUrl: 'http://stt:9000/v1', apiKey: undefined, model: undefined });
    expect(elsewhere.speech.tts).toMatchObject({ baseUrl: 'http://tts:9001/v1', apiKey: 'tts-key' });
  });

  it.each([
    ['EMBEDDINGS_BASE_URL', { EMBEDDINGS_MODEL: 'embed-small' }],
    ['STT_BASE_URL', { STT_MODEL: 'whisper-1' }],
    ['TTS_BASE_URL', { TTS_MODEL: 'tts-1' }],
    ['STT_BASE_URL', { STT_BASE_URL: 'not a url' }],
    ['EMBEDDINGS_DIMENSIONS', { EMBEDDINGS_DIMENSIONS: '0' }],
    ['PORT', { PORT: '70000' }],
    ['PORT', { PORT: 'http' }],
    ['HTTP_ENGINE', { HTTP_ENGINE: 'fastify' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['REDIS_URL', { REDIS_URL: 'localhost:6379' }],
    ['TROUPE_BOOTSTRAP_KEY', { TROUPE_BOOTSTRAP_KEY: 'sk-other-abcdefghijklmnop' }],
    ['TROUPE_ADMIN_TOKEN', { TROUPE_ADMIN_TOKEN: 'short' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'verbose' }],
    ['MAX_JSON_BODY_BYTES', { MAX_JSON_BODY_BYTES: '10' }],
    ['METRICS_PUBLIC', { METRICS_PUBLIC: 'false' }],
    ['LIVEKIT_URL', { LIVEKIT_URL: 'https://livekit.example.com', LIVEKIT_API_KEY: 'k', LIVEKIT_API_SECRET: 's' }],
    ['LIVEKIT_API_SECRET', { LIVEKIT_URL: 'wss://livekit.example.com', LIVEKIT_API_KEY: 'k' }],
    ['ROOM_TOKEN_TTL_S', { ROOM_TOKEN_TTL_S: '10' }],
    ['ROOM_MAX_AGENT_TURNS', { ROOM_MAX_AGENT_TURNS: '11' }],
  ])('names %s when its value is bad', (name, env) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}: `));
  });
});
