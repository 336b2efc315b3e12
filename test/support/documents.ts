import type { TestServer } from './server.ts';

export interface UploadFile {
  name: string;
  type: string;
  bytes: Uint8Array | string;
}

/** POSTs one file as multipart/form-data (part `file`) with the real fetch and FormData. */
export async function upload(baseUrl: string, key: string, characterId: string, file: UploadFile): Promise<{ status: number; body: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const form = new FormData();
  const bytes = typeof file.bytes === 'string' ? new TextEncoder().encode(file.bytes) : file.bytes;
  form.append('file', new Blob([bytes as Uint8Array<ArrayBuffer>], { type: file.type }), file.name);
  const res = await fetch(`${baseUrl}/characters/${characterId}/documents`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/**
 * Resolves with the document once this server's processor finished it (ready or failed): waits
 * on the processor's event, after checking it did not finish already.
 */
export async function settled(t: TestServer, characterId: string, documentId: string, key: string): Promise<{ status: string; chunkCount: number; errorMessage: string | null }> {
  const processor = t.server.resources.documentProcessor;
  let stop = () => {};
  const event = new Promise<void>((resolve) => {
    stop = processor.onSettled((e) => {
      if (e.documentId === documentId) resolve();
    });
  });
  try {
    const client = t.client(key);
    const now = await client.get(`/characters/${characterId}/documents/${documentId}`).expect(200);
    if (now.status === 'ready' || now.status === 'failed') return now;
    await event;
    return await client.get(`/characters/${characterId}/documents/${documentId}`).expect(200);
  } finally {
    stop();
  }
}
