import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { createTempDatabase } from './databases.ts';
import { HTTP_ENGINE, type Backend } from './env.ts';
import { ApiClient } from './client.ts';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/** A storage location that outlives one server, for restart tests. */
export interface Storage {
  env: Record<string, string>;
  dispose(): Promise<void>;
}

export async function createStorage(backend: Backend): Promise<Storage> {
  if (backend.kind === 'postgres') {
    const db = await createTempDatabase(backend.url);
    return { env: { DATABASE_URL: db.url }, dispose: db.drop };
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'troupe-test-'));
  return { env: { TROUPE_DATA_DIR: dir }, dispose: () => rm(dir, { recursive: true, force: true }) };
}

export interface TestServer {
  server: RunningServer;
  url: string;
  /** Every log line the server wrote, parsed. */
  logs: Record<string, unknown>[];
  rawLogs: string[];
  admin: ApiClient;
  /** A new project with one key, through the admin API. */
  newProject(name?: string): Promise<{ projectId: string; keyId: string; key: string; client: ApiClient }>;
  client(key: string | null): ApiClient;
  /** Stops the server; `keepStorage` leaves the data for a restart. */
  close(options?: { keepStorage?: boolean }): Promise<void>;
}

export async function startTestServer(
  backend: Backend,
  options: { env?: Record<string, string>; storage?: Storage } = {},
): Promise<TestServer> {
  const storage = options.storage ?? (await createStorage(backend));
  const rawLogs: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        rawLogs.push(line);
        logs.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    HTTP_ENGINE,
    TROUPE_ADMIN_TOKEN: ADMIN_TOKEN,
    LOG_LEVEL: 'info',
    SHUTDOWN_GRACE_MS: '5000',
    ...storage.env,
    ...options.env,
  });
  const server = await startServer(config, createLogger(config.logLevel, sink));
  const client = (key: string | null) => new ApiClient(server.url, key);
  const admin = client(ADMIN_TOKEN);
  const testServer: TestServer = {
    server,
    url: server.url,
    logs,
    rawLogs,
    admin,
    client,
    async newProject(name = 'test project') {
      const project = await admin.post('/admin/projects', { name }).expect(201);
      const key = await admin.post(`/admin/projects/${project.id as string}/keys`, { name: 'test' }).expect(201);
      return { projectId: project.id as string, keyId: key.id as string, key: key.key as string, client: client(key.key as string) };
    },
    async close(closeOptions = {}) {
      liveTestServers.delete(testServer);
      await server.stop();
      if (!closeOptions.keepStorage && !options.storage) await storage.dispose();
    },
  };
  liveTestServers.add(testServer);
  return testServer;
}

/** The in-process servers of the running test file (their logs go with a failing test's report). */
export const liveTestServers = new Set<TestServer>();
