import { useState } from 'preact/hooks';
import { api } from '../lib/api.ts';
import { href, navigate, onLinkClick } from '../lib/router.ts';
import type { Room } from '../lib/types.ts';
import { useAction, useLoad } from '../lib/use-load.ts';
import { Empty, ErrorNote, Field } from '../ui.tsx';
import { plural } from './characters.tsx';
import { SceneRoom } from './scene-room.tsx';

/** Scenes are the API's rooms: several characters and players in one live transcript. */
export function ScenesPage({ roomId }: { roomId: string | null }) {
  const rooms = useLoad(() => api.get<Room[]>('/v1/rooms?limit=1000'), 'rooms');
  return (
    <div class="split">
      <section class="list" aria-labelledby="scenes-heading">
        <h1 id="scenes-heading">Scenes</h1>
        <CreateScene onCreated={async (room) => {
          await rooms.reload();
          navigate(href('scenes', room.id));
        }} />
        <ErrorNote error={rooms.error} />
        {rooms.data?.length === 0 && <Empty>No active scenes.</Empty>}
        <ul>
          {rooms.data?.map((r) => (
            <li key={r.id}>
              <a href={href('scenes', r.id)} onClick={onLinkClick} aria-current={r.id === roomId ? 'true' : undefined}>
                <strong>{r.name}</strong>
                <span class="muted">
                  {r.mode} · {plural(r.participants.length, 'character', 'characters')}
                </span>
              </a>
            </li>
          ))}
        </ul>
      </section>
      <section class="detail">
        {roomId ? <SceneRoom key={roomId} roomId={roomId} onChanged={rooms.reload} /> : <Empty>Pick a scene, or create one, then add characters and type as a player.</Empty>}
      </section>
    </div>
  );
}

function CreateScene({ onCreated }: { onCreated: (room: Room) => Promise<void> }) {
  const [name, setName] = useState('');
  const [mode, setMode] = useState<'freeform' | 'scripted'>('freeform');
  const [scenePrompt, setScenePrompt] = useState('');
  const create = useAction();
  return (
    <form
      class="stack card"
      onSubmit={(e) => {
        e.preventDefault();
        create.run(async () => {
          const room = await api.post<Room>('/v1/rooms', { name, mode, scenePrompt: scenePrompt.trim() ? scenePrompt : null });
          setName('');
          setScenePrompt('');
          await onCreated(room);
        });
      }}
    >
      <Field label="Scene name">
        <input name="scene-name" required maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Mode" hint="Freeform: the addressed or most relevant character answers. Scripted: the scene prompt directs.">
        <select value={mode} onChange={(e) => setMode(e.currentTarget.value as 'freeform' | 'scripted')}>
          <option value="freeform">freeform</option>
          <option value="scripted">scripted</option>
        </select>
      </Field>
      {mode === 'scripted' && (
        <Field label="Scene prompt">
          <textarea rows={3} maxLength={5000} value={scenePrompt} onInput={(e) => setScenePrompt(e.currentTarget.value)} />
        </Field>
      )}
      <ErrorNote error={create.error} />
      <button type="submit" class="primary" disabled={create.busy}>
        Create scene
      </button>
    </form>
  );
}
