import { api, enc } from '../lib/api.ts';
import { href, navigate, onLinkClick } from '../lib/router.ts';
import type { Capability, Character } from '../lib/types.ts';
import { useLoad } from '../lib/use-load.ts';
import { Empty, ErrorNote } from '../ui.tsx';
import { CharacterEditor } from './character-editor.tsx';

/** Characters: the list beside the editor of the one selected (`new` for a new one). */
export function CharactersPage({ selected }: { selected: string | null }) {
  const characters = useLoad(() => api.get<Character[]>('/characters?limit=1000'), 'characters');
  const capabilities = useLoad(() => api.get<Capability[]>('/capabilities?limit=1000'), 'capabilities');
  const current = characters.data?.find((c) => c.id === selected) ?? null;
  return (
    <div class="split">
      <section class="list" aria-labelledby="characters-heading">
        <div class="list-head">
          <h1 id="characters-heading">Characters</h1>
          <a class="button primary" href={href('characters', 'new')} onClick={onLinkClick}>
            New character
          </a>
        </div>
        <ErrorNote error={characters.error} />
        {characters.data?.length === 0 && <Empty>No characters yet. Create the first one.</Empty>}
        <ul>
          {characters.data?.map((c) => (
            <li key={c.id}>
              <a href={href('characters', c.id)} onClick={onLinkClick} aria-current={c.id === selected ? 'true' : undefined}>
                <strong>{c.name}</strong>
                <span class="muted">{plural(c.capabilityGroupIds.length, 'capability', 'capabilities')}</span>
              </a>
            </li>
          ))}
        </ul>
      </section>
      <section class="detail">
        {selected === 'new' && (
          <CharacterEditor
            key="new"
            character={null}
            capabilities={capabilities.data ?? []}
            onSaved={async (saved) => {
              await characters.reload();
              navigate(href('characters', saved.id), true);
            }}
          />
        )}
        {current && (
          <CharacterEditor
            key={current.id}
            character={current}
            capabilities={capabilities.data ?? []}
            onSaved={() => characters.reload()}
            onDeleted={async () => {
              await characters.reload();
              navigate(href('characters'), true);
            }}
          />
        )}
        {!current && selected !== 'new' && selected && characters.data && <Empty>No character {selected} in this project.</Empty>}
        {!selected && <Empty>Pick a character, or create one. A character is a name, a persona and a voice; give it knowledge and capabilities, then talk to it in the Playground.</Empty>}
        {current && (
          <p class="links">
            <a href={href('knowledge', current.id)} onClick={onLinkClick}>
              Knowledge of {current.name}
            </a>
            <a href={href('playground', current.id)} onClick={onLinkClick}>
              Talk to {current.name}
            </a>
          </p>
        )}
      </section>
    </div>
  );
}

export const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

export const characterPath = (id: string, rest = '') => `/characters/${enc(id)}${rest}`;
