import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ApiClient } from '../support/client.ts';
import { createTempDatabase } from '../support/databases.ts';
import { upload } from '../support/documents.ts';
import { BACKENDS, HTTP_ENGINE, POSTGRES_URL } from '../support/env.ts';
import { startFakeUpstream, type FakeUpstream } from '../support/openai/fake-upstream.ts';
import { spawnTroupe, type TroupeProcess } from '../support/process.ts';
import { createStorage } from '../support/server.ts';

const KEY = 'sk-troupe-documents_processes_key_01';

const baseEnv = (upstream: FakeUpstream) => ({
  HTTP_ENGINE,
  TROUPE_BOOTSTRAP_KEY: KEY,
  INFERENCE_BASE_URL: upstream.url,
  INFERENCE_MODEL: 'fake-chat-1',
  EMBEDDINGS_MODEL: 'fake-embed-1',
  INFERENCE_MAX_RETRIES: '0',
  DOCUMENT_LEASE_MS: '1000',
  DOCUMENT_POLL_MS: '200',
});

/** The `document processed` log line of one document, in a process's output. */
const processedLine = (id: string) => new RegExp(`"documentId":"${id}","status":"(ready|failed)"[^\\n]*"msg":"document processed"`);

describe.each(BACKENDS)('documents across process restarts on $kind', (backend) => {
  // Held at its embeddings call, the only pause point processing has, which needs pgvector.
  it.runIf(backend.vectors)('takes up a document whose process died while processing it, and indexes it once', async () => {
    // Cleanup is registered, not in `finally`: a test that times out never reaches its finally.
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const storage = await createStorage(backend);
    onTestFinished(() => storage.dispose());
    const env = { ...baseEnv(upstream), ...storage.env };
    const first = await spawnTroupe(env);
    onTestFinished(async () => void (await first.stop('SIGKILL')));
    const api = new ApiClient(first.url, KEY);
    const character = await api.post('/characters', { name: 'Archivist' }).expect(201);
    const hold = upstream.holdEmbeddings();
    const { status, body: doc } = await upload(first.url, KEY, character.id, { name: 'log.txt', type: 'text/plain', bytes: 'The ship log ends on the ninth of Frostmonth.' });
    expect(status).toBe(202);
    await hold.arrived; // the first process is embedding it: status processing
    expect((await api.get(`/characters/${character.id}/documents/${doc.id}`).expect(200)).status).toBe('processing');
    expect(await first.stop('SIGKILL')).toBeNull();
    hold.release();

    const second = await spawnTroupe(env);
    onTestFinished(async () => void (await second.stop()));
    // Once the dead process's lease runs out, the new one claims the document.
    await second.waitForOutput(processedLine(doc.id));
    const again = new ApiClient(second.url, KEY);
    const done = await again.get(`/characters/${character.id}/documents/${doc.id}`).expect(200);
    expect(done).toMatchObject({ status: 'ready', chunkCount: 1, errorMessage: null });
    const conversation = await again.post('/conversations', { characterId: character.id }).expect(201);
    upstream.script({ text: 'Frostmonth.' });
    const reply = await again.post(`/conversations/${conversation.id}/messages`, { content: 'When does the ship log end?' }).expect(200);
    // One chunk, cited once: the interrupted run left nothing behind.
    expect(reply.citations.map((c: { documentId: string }) => c.documentId)).toEqual([doc.id]);
  });
});

/** Two live processes on one PostgreSQL database: each document is processed by exactly one. */
describe.skipIf(!POSTGRES_URL)('documents with two processes on PostgreSQL', () => {
  let upstream: FakeUpstream;
  let drop: () => Promise<void>;
  let a: TroupeProcess;
  let b: TroupeProcess;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    const db = await createTempDatabase(POSTGRES_URL as string);
    drop = db.drop;
    const env = { ...baseEnv(upstream), DATABASE_URL: db.url, DOCUMENT_CONCURRENCY: '2' };
    [a, b] = await Promise.all([spawnTroupe(env), spawnTroupe(env)]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await upstream?.close();
    await drop?.();
  });

  it('processes every document once, wherever it was uploaded', async () => {
    const api = new ApiClient(a.url, KEY);
    const character = await api.post('/characters', { name: 'Librarian' }).expect(201);
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const server = i % 2 === 0 ? a : b;
      const { body } = await upload(server.url, KEY, character.id, { name: `book-${i}.txt`, type: 'text/plain', bytes: `Book ${i} tells of the island number ${i}.` });
      ids.push(body.id as string);
    }
    // Each document's `processed` line appears in exactly one of the two processes.
    await Promise.all(ids.map((id) => Promise.race([a.waitForOutput(processedLine(id)), b.waitForOutput(processedLine(id))])));
    for (const id of ids) {
      const inA = processedLine(id).test(a.stdout());
      const inB = processedLine(id).test(b.stdout());
      expect(inA !== inB).toBe(true);
    }
    const listed = await api.get(`/characters/${character.id}/documents`).expect(200);
    expect(listed.map((d: { status: string; chunkCount: number }) => [d.status, d.chunkCount])).toEqual(ids.map(() => ['ready', 1]));
  });
});
