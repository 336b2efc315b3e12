import OpenAI from 'openai';
import { startFakeUpstream, type FakeUpstream } from './openai/fake-upstream.ts';
import type { Backend } from './env.ts';
import { startTestServer, type TestServer } from './server.ts';
import type { ApiClient } from './client.ts';

export interface V1Fixture {
  t: TestServer;
  upstream: FakeUpstream;
  api: ApiClient;
  key: string;
  projectId: string;
  /** The official SDK pointed at Troupe's /v1 with the project's key; no retries of its own. */
  openai: OpenAI;
  close(): Promise<void>;
}

/** A Troupe server whose inference upstream is a fake OpenAI-compatible server. */
export async function startV1Fixture(backend: Backend, env: Record<string, string> = {}): Promise<V1Fixture> {
  const upstream = await startFakeUpstream({ requireApiKey: 'upstream-secret' });
  const t = await startTestServer(backend, {
    env: {
      INFERENCE_BASE_URL: upstream.url,
      INFERENCE_API_KEY: 'upstream-secret',
      INFERENCE_MODEL: 'fake-chat-1',
      INFERENCE_MAX_RETRIES: '0',
      ...env,
    },
  });
  const project = await t.newProject();
  return {
    t,
    upstream,
    api: project.client,
    key: project.key,
    projectId: project.projectId,
    openai: new OpenAI({ baseURL: `${t.url}/v1`, apiKey: project.key, maxRetries: 0 }),
    async close() {
      await t.close();
      await upstream.close();
    },
  };
}

/** The /v1 suites' character: Captain Rook, with one client capability, `wave`. */
export async function createCaptainRook(api: ApiClient): Promise<{ character: { id: string; name: string }; waveId: string }> {
  const wave = await api
    .post('/capabilities', {
      name: 'wave',
      description: 'Wave at someone',
      type: 'client_function_fire',
      parameters: [{ name: 'target', type: 'string', description: 'Who to wave at', required: true }],
    })
    .expect(201);
  const character = await api.post('/characters', { name: 'Captain Rook', description: 'A gruff harbour master.', capabilityGroupIds: [wave.id] }).expect(201);
  return { character, waveId: wave.id as string };
}
