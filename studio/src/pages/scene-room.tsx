import { useState } from 'preact/hooks';
import { api, enc } from '../lib/api.ts';
import { useRoomLive } from '../lib/room-live.ts';
import type { Character, Room, TranscriptEntry } from '../lib/types.ts';
import { useAction, useLoad } from '../lib/use-load.ts';
import { ConfirmButton, CopyButton, Empty, ErrorNote, Field, useFollow } from '../ui.tsx';

export function SceneRoom({ roomId, onChanged }: { roomId: string; onChanged: () => Promise<void> }) {
  const base = `/v1/rooms/${enc(roomId)}`;
  const room = useLoad(() => api.get<Room>(base), roomId);
  const history = useLoad(() => api.get<TranscriptEntry[]>(`${base}/transcript`), roomId);
  const characters = useLoad(() => api.get<Character[]>('/characters?limit=1000'), 'characters');
  const live = useRoomLive(roomId, history.data, () => void room.reload());
  const follow = useFollow<HTMLOListElement>(`${live.transcript.length}:${live.partial?.text.length ?? -1}`);
  const [choice, setChoice] = useState('');
  const [speakerName, setSpeakerName] = useState('Player');
  const [line, setLine] = useState('');
  const [token, setToken] = useState<string | null>(null);
  const [started, setStarted] = useState(false);
  const add = useAction();
  const remove = useAction();
  const tokenAction = useAction();
  const start = useAction();
  const end = useAction();

  const nameOf = (id: string | null) => characters.data?.find((c) => c.id === id)?.name ?? id ?? 'Player';
  const present = room.data?.participants.filter((p) => p.leftAt === null) ?? [];
  const absent = characters.data?.filter((c) => !present.some((p) => p.characterId === c.id)) ?? [];
  const ended = room.data?.endedAt != null;
  const changed = async () => {
    await room.reload();
    await onChanged();
  };

  return (
    <div class="stack">
      <ErrorNote error={room.error} />
      <h2>{room.data?.name ?? 'Scene'}</h2>
      <p class="muted">
        {room.data?.mode} · {ended ? `ended ${new Date(room.data?.endedAt ?? '').toLocaleString()}` : <span role="status">{live.state === 'open' ? 'live' : live.state}</span>}
        {live.state === 'closed' && !ended && (
          <button type="button" class="quiet" onClick={live.reconnect}>
            Reconnect
          </button>
        )}
      </p>
      <section aria-labelledby="cast-heading" class="stack">
        <h3 id="cast-heading">Characters in the scene</h3>
        {present.length === 0 && <Empty>{ended ? 'The scene has ended.' : 'Add at least one character.'}</Empty>}
        <ul class="chips">
          {present.map((p) => (
            <li key={p.id} class={live.speaking === p.characterId ? 'speaking' : ''}>
              <span>
                {nameOf(p.characterId)}
                {live.speaking === p.characterId && <em class="badge"> speaking</em>}
              </span>
              <button type="button" disabled={remove.busy || ended} aria-label={`Remove ${nameOf(p.characterId)}`} onClick={() => remove.run(async () => {
                await api.delete(`${base}/participants/${enc(p.characterId)}`);
                await changed();
              })}>
                Remove
              </button>
            </li>
          ))}
        </ul>
        <ErrorNote error={remove.error} />
        <form class="row inline" onSubmit={(e) => {
          e.preventDefault();
          add.run(async () => {
            await api.post(`${base}/participants`, { characterId: choice });
            setChoice('');
            await changed();
          });
        }}>
          <Field label="Add a character">
            <select value={choice} disabled={ended} onChange={(e) => setChoice(e.currentTarget.value)}>
              <option value="">Choose…</option>
              {absent.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name}
                </option>
              ))}
            </select>
          </Field>
          <button type="submit" disabled={!choice || add.busy}>
            Add
          </button>
        </form>
        <ErrorNote error={add.error} />
      </section>
      <section aria-labelledby="transcript-heading" class="stack">
        <h3 id="transcript-heading">Transcript</h3>
        <ErrorNote error={history.error} />
        {live.transcript.length === 0 && !live.partial && <Empty>Nothing said yet.</Empty>}
        <ol class="log transcript" aria-live="polite" aria-label="Transcript" ref={follow}>
          {live.transcript.map((entry) => (
            <li key={entry.id} class={`bubble ${entry.speakerType === 'agent' ? 'character' : 'player'}`}>
              <span class="who">{entry.speakerType === 'agent' ? nameOf(entry.characterId) : (entry.speakerName ?? 'Player')}</span>
              <p>{entry.content}</p>
            </li>
          ))}
          {live.partial && (
            <li class="bubble character" aria-busy="true">
              <span class="who">{nameOf(live.partial.characterId)} (speaking)</span>
              <p>{live.partial.text}</p>
            </li>
          )}
        </ol>
        {live.errors.map((e) => (
          <p class="error" role="alert" key={e.key}>
            {e.message}
            {e.code && <span class="code"> ({e.code})</span>}
          </p>
        ))}
        <form class="composer" onSubmit={(e) => {
          e.preventDefault();
          if (line.trim() && live.send(line.trim(), speakerName)) setLine('');
        }}>
          <Field label="Speak as">
            <input value={speakerName} maxLength={100} onInput={(e) => setSpeakerName(e.currentTarget.value)} />
          </Field>
          <label class="field grow">
            <span class="label">Line (name a character to address it)</span>
            <input name="line" value={line} disabled={ended} onInput={(e) => setLine(e.currentTarget.value)} />
          </label>
          <button type="submit" class="primary" disabled={live.state !== 'open' || ended || !line.trim()}>
            Say
          </button>
        </form>
      </section>
      <section aria-labelledby="voice-heading" class="stack">
        <h3 id="voice-heading">Voice session</h3>
        <div class="actions">
          <button type="button" disabled={tokenAction.busy || ended} onClick={() => tokenAction.run(async () => {
            setToken((await api.get<{ token: string }>(`${base}/token`)).token);
          })}>
            Get a join token
          </button>
          {token && <CopyButton text={token} label="Copy join token" />}
        </div>
        {token && <code class="secret">{token}</code>}
        <ErrorNote error={tokenAction.error} />
        <div class="actions">
          <button type="button" disabled={start.busy || ended} onClick={() => start.run(async () => {
            await api.post(`${base}/start`);
            setStarted(true);
          })}>
            Start the scene
          </button>
          {started && <span role="status">Started: the characters' voice agents are joining.</span>}
          <ConfirmButton label="End scene" question="End this scene for everyone?" busy={end.busy || ended} onConfirm={() => end.run(async () => {
            await api.post(`${base}/end`);
            await changed();
          })} />
        </div>
        <ErrorNote error={start.error} />
        <ErrorNote error={end.error} />
      </section>
    </div>
  );
}
