import { useState } from 'preact/hooks';
import { api, enc } from '../lib/api.ts';
import type { Capability, Character } from '../lib/types.ts';
import { useAction } from '../lib/use-load.ts';
import { ConfirmButton, Empty, ErrorNote, Field } from '../ui.tsx';

const orNull = (value: string) => (value.trim() === '' ? null : value);

export function CharacterEditor(props: {
  character: Character | null;
  capabilities: Capability[];
  onSaved: (saved: Character) => void | Promise<void>;
  onDeleted?: () => void | Promise<void>;
}) {
  const { character } = props;
  const [name, setName] = useState(character?.name ?? '');
  const [description, setDescription] = useState(character?.description ?? '');
  const [voiceId, setVoiceId] = useState(character?.voiceId ?? '');
  const [voiceDescription, setVoiceDescription] = useState(character?.voiceDescription ?? '');
  const [saved, setSaved] = useState(false);
  const save = useAction();
  const remove = useAction();

  const submit = (event: Event) => {
    event.preventDefault();
    setSaved(false);
    save.run(async () => {
      const body = { name, description: orNull(description), voiceId: orNull(voiceId), voiceDescription: orNull(voiceDescription) };
      const result = character ? await api.patch<Character>(`/characters/${enc(character.id)}`, body) : await api.post<Character>('/characters', body);
      setSaved(true);
      await props.onSaved(result);
    });
  };

  return (
    <div>
      <h2>{character ? `Edit ${character.name}` : 'New character'}</h2>
      <form onSubmit={submit} class="stack">
        <Field label="Name">
          <input name="name" required maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Description" hint="Personality and behaviour; the character's persona.">
          <textarea name="description" rows={5} maxLength={20000} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
        </Field>
        <div class="row">
          <Field label="Voice id">
            <input name="voiceId" maxLength={200} value={voiceId} onInput={(e) => setVoiceId(e.currentTarget.value)} />
          </Field>
          <Field label="Voice description" hint="A free-form instruction for speech.">
            <input name="voiceDescription" maxLength={2000} value={voiceDescription} onInput={(e) => setVoiceDescription(e.currentTarget.value)} />
          </Field>
        </div>
        <ErrorNote error={save.error} />
        <div class="actions">
          <button type="submit" class="primary" disabled={save.busy}>
            {character ? 'Save changes' : 'Create character'}
          </button>
          {saved && !save.busy && <span role="status">Saved.</span>}
          {character && props.onDeleted && (
            <ConfirmButton
              label="Delete"
              question={`Delete ${character.name} with its conversations and documents?`}
              busy={remove.busy}
              onConfirm={() => remove.run(async () => {
                await api.delete(`/characters/${enc(character.id)}`);
                await props.onDeleted?.();
              })}
            />
          )}
        </div>
        <ErrorNote error={remove.error} />
      </form>
      {character && <AttachedCapabilities character={character} capabilities={props.capabilities} onChanged={props.onSaved} />}
    </div>
  );
}

function AttachedCapabilities(props: { character: Character; capabilities: Capability[]; onChanged: (c: Character) => void | Promise<void> }) {
  const { character, capabilities } = props;
  const [choice, setChoice] = useState('');
  const attach = useAction();
  const detach = useAction();
  const attached = character.capabilityGroupIds.map((id) => capabilities.find((c) => c.id === id) ?? { id, name: id, type: '' });
  const free = capabilities.filter((c) => !character.capabilityGroupIds.includes(c.id));
  const base = `/characters/${enc(character.id)}/capabilities`;
  return (
    <section aria-labelledby="attached-heading" class="stack">
      <h3 id="attached-heading">Capabilities</h3>
      {attached.length === 0 && <Empty>None attached: this character only talks.</Empty>}
      <ul class="chips">
        {attached.map((c) => (
          <li key={c.id}>
            <span>
              {c.name} <span class="muted">{c.type}</span>
            </span>
            <button
              type="button"
              aria-label={`Detach ${c.name}`}
              disabled={detach.busy}
              onClick={() => detach.run(async () => props.onChanged(await api.delete<Character>(`${base}/${enc(c.id)}`)))}
            >
              Detach
            </button>
          </li>
        ))}
      </ul>
      <ErrorNote error={detach.error} />
      <form
        class="row inline"
        onSubmit={(e) => {
          e.preventDefault();
          attach.run(async () => {
            await props.onChanged(await api.post<Character>(base, { capabilityId: choice }));
            setChoice('');
          });
        }}
      >
        <Field label="Attach a capability">
          <select value={choice} onChange={(e) => setChoice(e.currentTarget.value)}>
            <option value="">{free.length ? 'Choose…' : 'No other capabilities: create one first'}</option>
            {free.map((c) => (
              <option key={c.id} value={c.id}>
                {c.name} ({c.type})
              </option>
            ))}
          </select>
        </Field>
        <button type="submit" disabled={!choice || attach.busy}>
          Attach
        </button>
      </form>
      <ErrorNote error={attach.error} />
    </section>
  );
}
