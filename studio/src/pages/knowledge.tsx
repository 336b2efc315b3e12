import { useEffect, useState } from 'preact/hooks';
import { api, type ApiError } from '../lib/api.ts';
import { href, navigate } from '../lib/router.ts';
import type { Character, TroupeDocument } from '../lib/types.ts';
import { ACCEPTED, uploadDocument } from '../lib/upload.ts';
import { asApiError, useAction, useLoad } from '../lib/use-load.ts';
import { CharacterSelect, ConfirmButton, Empty, ErrorNote } from '../ui.tsx';
import { characterPath } from './characters.tsx';

interface Upload {
  id: number;
  name: string;
  progress: number;
  error: ApiError | null;
}

/** While a document is pending or processing its status is polled: the API has no document events. */
const POLL_MS = 1000;

export function KnowledgePage({ characterId }: { characterId: string }) {
  const characters = useLoad(() => api.get<Character[]>('/characters?limit=1000'), 'characters');
  return (
    <section aria-labelledby="knowledge-heading" class="stack">
      <h1 id="knowledge-heading">Knowledge</h1>
      <p class="muted">Documents a character answers from. Replies cite the parts they used.</p>
      <ErrorNote error={characters.error} />
      <CharacterSelect characters={characters.data ?? []} value={characterId} onChange={(id) => navigate(href('knowledge', id))} />
      {characterId ? <Documents key={characterId} characterId={characterId} /> : <Empty>Choose a character to see and upload its documents.</Empty>}
    </section>
  );
}

function Documents({ characterId }: { characterId: string }) {
  const documents = useLoad(() => api.get<TroupeDocument[]>(characterPath(characterId, '/documents?limit=1000')), characterId);
  const [uploads, setUploads] = useState<Upload[]>([]);
  const [dragging, setDragging] = useState(false);
  const busy = documents.data?.some((d) => d.status === 'pending' || d.status === 'processing') ?? false;

  useEffect(() => {
    if (!busy) return;
    const timer = setInterval(() => void documents.reload(), POLL_MS);
    return () => clearInterval(timer);
  }, [busy, documents.reload]);

  const send = (files: FileList | null) => {
    for (const file of Array.from(files ?? [])) {
      const id = Math.random();
      const patch = (change: Partial<Upload>) => setUploads((all) => all.map((u) => (u.id === id ? { ...u, ...change } : u)));
      setUploads((all) => [...all, { id, name: file.name, progress: 0, error: null }]);
      uploadDocument(characterId, file, (progress) => patch({ progress })).then(
        async () => {
          setUploads((all) => all.filter((u) => u.id !== id));
          await documents.reload();
        },
        (err: unknown) => patch({ error: asApiError(err) }),
      );
    }
  };

  return (
    <div class="stack">
      <label
        class={`dropzone${dragging ? ' dragging' : ''}`}
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          e.preventDefault();
          setDragging(false);
          send(e.dataTransfer?.files ?? null);
        }}
      >
        <strong>Drop files here, or choose them</strong>
        <span class="muted">PDF, Word (.docx), text, Markdown, HTML, PNG, JPEG or WebP; up to 50 MB each.</span>
        <input type="file" multiple accept={ACCEPTED} aria-label="Upload documents" onChange={(e) => {
          send(e.currentTarget.files);
          e.currentTarget.value = '';
        }} />
      </label>
      {uploads.map((u) => (
        <div class="upload" key={u.id}>
          <span>{u.name}</span>
          <progress max={1} value={u.progress} aria-label={`Uploading ${u.name}`} />
          <ErrorNote error={u.error} />
          {u.error && (
            <button type="button" onClick={() => setUploads((all) => all.filter((x) => x.id !== u.id))}>
              Dismiss
            </button>
          )}
        </div>
      ))}
      <ErrorNote error={documents.error} />
      {documents.data?.length === 0 && <Empty>No documents yet.</Empty>}
      {documents.data && documents.data.length > 0 && (
        <table class="documents">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Chunks</th>
              <th scope="col">Size</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {documents.data.map((d) => (
              <DocumentRow key={d.id} characterId={characterId} document={d} onChanged={documents.reload} />
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function DocumentRow({ characterId, document: d, onChanged }: { characterId: string; document: TroupeDocument; onChanged: () => Promise<void> }) {
  const action = useAction();
  const path = characterPath(characterId, `/documents/${encodeURIComponent(d.id)}`);
  return (
    <tr data-document={d.name}>
      <td>
        {d.name}
        <div class="muted">{d.mimeType}</div>
      </td>
      <td data-label="Status">
        <span class={`status ${d.status}`} role="status">
          {d.status}
        </span>
        {d.errorMessage && <p class="error">{d.errorMessage}</p>}
      </td>
      <td data-label="Chunks">{d.chunkCount}</td>
      <td data-label="Size">{formatSize(d.fileSize)}</td>
      <td>
        <div class="actions">
        <button type="button" disabled={action.busy} onClick={() => action.run(async () => {
          await api.post(`${path}/reprocess`);
          await onChanged();
        })}>
          Reprocess
        </button>
        <ConfirmButton label="Delete" question={`Delete ${d.name}?`} busy={action.busy} onConfirm={() => action.run(async () => {
          await api.delete(path);
          await onChanged();
        })} />
        </div>
        <ErrorNote error={action.error} />
      </td>
    </tr>
  );
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
