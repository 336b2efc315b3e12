import { useState } from 'preact/hooks';
import { api, enc } from '../lib/api.ts';
import { href, navigate, onLinkClick } from '../lib/router.ts';
import type { Capability, CapabilityType, Parameter } from '../lib/types.ts';
import { useAction, useLoad } from '../lib/use-load.ts';
import { ConfirmButton, Empty, ErrorNote, Field } from '../ui.tsx';
import { ParameterEditor } from './parameter-editor.tsx';

const TYPES: { value: CapabilityType; text: string }[] = [
  { value: 'client_function_call', text: 'Client function, returns a result' },
  { value: 'client_function_fire', text: 'Client function, fire and forget' },
  { value: 'server_function_call', text: 'Server webhook, returns a result' },
  { value: 'server_function_fire', text: 'Server webhook, fire and forget' },
];

const isServer = (type: CapabilityType) => type.startsWith('server_');

export function CapabilitiesPage({ selected }: { selected: string | null }) {
  const capabilities = useLoad(() => api.get<Capability[]>('/capabilities?limit=1000'), 'capabilities');
  const current = capabilities.data?.find((c) => c.id === selected) ?? null;
  return (
    <div class="split">
      <section class="list" aria-labelledby="capabilities-heading">
        <div class="list-head">
          <h1 id="capabilities-heading">Capabilities</h1>
          <a class="button primary" href={href('capabilities', 'new')} onClick={onLinkClick}>
            New capability
          </a>
        </div>
        <ErrorNote error={capabilities.error} />
        {capabilities.data?.length === 0 && <Empty>No capabilities yet. A capability is a function a character may call.</Empty>}
        <ul>
          {capabilities.data?.map((c) => (
            <li key={c.id}>
              <a href={href('capabilities', c.id)} onClick={onLinkClick} aria-current={c.id === selected ? 'true' : undefined}>
                <strong>{c.name}</strong>
                <span class="muted">{c.type}</span>
              </a>
            </li>
          ))}
        </ul>
      </section>
      <section class="detail">
        {(selected === 'new' || current) && (
          <CapabilityEditor
            key={current?.id ?? 'new'}
            capability={current}
            onSaved={async (saved) => {
              await capabilities.reload();
              if (!current) navigate(href('capabilities', saved.id), true);
            }}
            onDeleted={async () => {
              await capabilities.reload();
              navigate(href('capabilities'), true);
            }}
          />
        )}
        {!selected && <Empty>Pick a capability, or create one, then attach it to characters on the Characters page.</Empty>}
      </section>
    </div>
  );
}

function CapabilityEditor(props: { capability: Capability | null; onSaved: (c: Capability) => Promise<void>; onDeleted: () => Promise<void> }) {
  const { capability } = props;
  const [name, setName] = useState(capability?.name ?? '');
  const [description, setDescription] = useState(capability?.description ?? '');
  const [type, setType] = useState<CapabilityType>(capability?.type ?? 'client_function_call');
  const [webhookUrl, setWebhookUrl] = useState(capability?.webhookUrl ?? '');
  const [parameters, setParameters] = useState<Parameter[]>(capability?.parameters ?? []);
  const [saved, setSaved] = useState(false);
  const save = useAction();
  const remove = useAction();

  const submit = (event: Event) => {
    event.preventDefault();
    setSaved(false);
    save.run(async () => {
      const common = {
        name,
        description: description.trim() === '' ? null : description,
        parameters: parameters.map((p) => ({ ...p, description: p.description?.trim() ? p.description : null })),
        webhookUrl: isServer(type) ? webhookUrl || null : null,
      };
      const result = capability
        ? await api.patch<Capability>(`/capabilities/${enc(capability.id)}`, common)
        : await api.post<Capability>('/capabilities', { ...common, type });
      setSaved(true);
      await props.onSaved(result);
    });
  };

  return (
    <form onSubmit={submit} class="stack">
      <h2>{capability ? `Edit ${capability.name}` : 'New capability'}</h2>
      <Field label="Name" hint="A function name: letters, digits, _ and -, up to 64.">
        <input name="name" required pattern="[a-zA-Z0-9_\-]{1,64}" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Description" hint="Shown to the model: say when to call it.">
        <textarea name="description" rows={3} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </Field>
      <Field label="Type" hint={capability ? 'The type is fixed after creation; create a new capability for another type.' : 'Fixed once created.'}>
        <select name="type" value={type} disabled={capability !== null} onChange={(e) => setType(e.currentTarget.value as CapabilityType)}>
          {TYPES.map((t) => (
            <option key={t.value} value={t.value}>
              {t.value} — {t.text}
            </option>
          ))}
        </select>
      </Field>
      {isServer(type) && (
        <Field label="Webhook URL" hint="Troupe POSTs each call here, signed with the project's webhook secret.">
          <input name="webhookUrl" type="url" required placeholder="https://game.example/troupe" value={webhookUrl} onInput={(e) => setWebhookUrl(e.currentTarget.value)} />
        </Field>
      )}
      <ParameterEditor parameters={parameters} onChange={setParameters} />
      <ErrorNote error={save.error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={save.busy}>
          {capability ? 'Save changes' : 'Create capability'}
        </button>
        {saved && !save.busy && <span role="status">Saved.</span>}
        {capability && (
          <ConfirmButton
            label="Delete"
            question={`Delete ${capability.name} and detach it from every character?`}
            busy={remove.busy}
            onConfirm={() => remove.run(async () => {
              await api.delete(`/capabilities/${enc(capability.id)}`);
              await props.onDeleted();
            })}
          />
        )}
      </div>
      <ErrorNote error={remove.error} />
    </form>
  );
}
