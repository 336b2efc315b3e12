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

  it.each([
    ['EMBEDDINGS_BASE_URL', { EMBEDDINGS_MODEL: 'embed-small' }],
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
  ])('names %s when its value is bad', (name, env) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}: `));
  });
});
