import { useState } from 'preact/hooks';
import { adminApi, api, enc } from '../lib/api.ts';
import { session } from '../lib/session.ts';
import type { ApiKey, Project } from '../lib/types.ts';
import { useAction, useLoad } from '../lib/use-load.ts';
import { ConfirmButton, CopyButton, Empty, ErrorNote, Field } from '../ui.tsx';

/** Projects and their API keys, through the admin API (the admin token given at sign-in). */
export function KeysPage() {
  const projects = useLoad(() => adminApi.get<Project[]>('/admin/projects?limit=1000'), 'projects');
  const [projectId, setProjectId] = useState('');
  const [name, setName] = useState('');
  const create = useAction();
  const selected = projectId || projects.data?.[0]?.id || '';
  return (
    <section aria-labelledby="keys-heading" class="stack">
      <h1 id="keys-heading">Projects and keys</h1>
      <ErrorNote error={projects.error} />
      <div class="row inline">
        <Field label="Project">
          <select value={selected} onChange={(e) => setProjectId(e.currentTarget.value)}>
            {projects.data?.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name} ({p.id})
              </option>
            ))}
          </select>
        </Field>
        <form class="row inline" onSubmit={(e) => {
          e.preventDefault();
          create.run(async () => {
            const project = await adminApi.post<Project>('/admin/projects', { name });
            setName('');
            await projects.reload();
            setProjectId(project.id);
          });
        }}>
          <Field label="New project">
            <input required maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </Field>
          <button type="submit" disabled={create.busy}>
            Create project
          </button>
        </form>
      </div>
      <ErrorNote error={create.error} />
      {projects.data?.length === 0 && <Empty>No projects.</Empty>}
      {selected && <ProjectKeys key={selected} projectId={selected} />}
    </section>
  );
}

function ProjectKeys({ projectId }: { projectId: string }) {
  const keys = useLoad(() => adminApi.get<ApiKey[]>(`/admin/projects/${enc(projectId)}/keys?limit=1000`), projectId);
  const [name, setName] = useState('');
  const [secret, setSecret] = useState<string | null>(null);
  const create = useAction();
  const revoke = useAction();
  const current = session.apiKey ?? '';
  return (
    <div class="stack">
      <form class="row inline" onSubmit={(e) => {
        e.preventDefault();
        create.run(async () => {
          const created = await adminApi.post<{ key: string }>(`/admin/projects/${enc(projectId)}/keys`, name.trim() ? { name: name.trim() } : {});
          setSecret(created.key);
          setName('');
          await keys.reload();
        });
      }}>
        <Field label="Key name (optional)">
          <input value={name} maxLength={200} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <button type="submit" class="primary" disabled={create.busy}>
          Create key
        </button>
      </form>
      <ErrorNote error={create.error} />
      {secret && (
        <div class="card notice" role="status">
          <p>
            <strong>Copy this key now.</strong> Troupe keeps only its hash and cannot show it again.
          </p>
          <code class="secret">{secret}</code>
          <div class="actions">
            <CopyButton text={secret} label="Copy key" />
            <button type="button" onClick={() => setSecret(null)}>
              I have copied it
            </button>
          </div>
        </div>
      )}
      <ErrorNote error={keys.error} />
      <ErrorNote error={revoke.error} />
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Prefix</th>
            <th scope="col">Created</th>
            <th scope="col">State</th>
          </tr>
        </thead>
        <tbody>
          {keys.data?.map((k) => (
            <tr key={k.id} data-key={k.id}>
              <td>
                {k.name ?? <span class="muted">unnamed</span>}
                {current.startsWith(k.prefix) && <em class="badge"> this studio's key</em>}
              </td>
              <td>
                <code>{k.prefix}…</code>
              </td>
              <td>{new Date(k.createdAt).toLocaleString()}</td>
              <td>
                {k.revokedAt ? (
                  <span class="muted">revoked</span>
                ) : (
                  <ConfirmButton label="Revoke" question={`Revoke ${k.name ?? k.prefix}? It stops working at once.`} busy={revoke.busy} onConfirm={() => revoke.run(async () => {
                    await adminApi.delete(`/admin/keys/${enc(k.id)}`);
                    await keys.reload();
                    // Revoking the studio's own key: the API now refuses it, which signs the studio out.
                    if (current.startsWith(k.prefix)) await api.get('/characters?limit=1');
                  })} />
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
