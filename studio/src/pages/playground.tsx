import { useEffect, useRef, useState } from 'preact/hooks';
import { api, enc, socketUrl } from '../lib/api.ts';
import { applyEvent, fromHistory, type LogItem } from '../lib/conversation.ts';
import { href, navigate } from '../lib/router.ts';
import type { Capability, Character, Message, TroupeDocument } from '../lib/types.ts';
import { useAction, useLoad } from '../lib/use-load.ts';
import { CharacterSelect, Empty, ErrorNote } from '../ui.tsx';
import { ChatLog } from './chat-log.tsx';

export function PlaygroundPage({ characterId, conversationId }: { characterId: string; conversationId: string | null }) {
  const characters = useLoad(() => api.get<Character[]>('/characters?limit=1000'), 'characters');
  const start = useAction();
  const character = characters.data?.find((c) => c.id === characterId);
  return (
    <section aria-labelledby="playground-heading" class="stack">
      <h1 id="playground-heading">Playground</h1>
      <ErrorNote error={characters.error} />
      <div class="row inline">
        <CharacterSelect characters={characters.data ?? []} value={characterId} onChange={(id) => navigate(href('playground', id))} />
        {characterId && (
          <button
            type="button"
            disabled={start.busy}
            onClick={() => start.run(async () => {
              const created = await api.post<{ id: string }>('/conversations', { characterId });
              navigate(href('playground', characterId, created.id));
            })}
          >
            New conversation
          </button>
        )}
      </div>
      <ErrorNote error={start.error} />
      {!characterId && <Empty>Choose a character to talk to.</Empty>}
      {characterId && !conversationId && <Empty>Start a new conversation with {character?.name ?? 'this character'}.</Empty>}
      {character && conversationId && <Conversation key={conversationId} character={character} conversationId={conversationId} />}
    </section>
  );
}

function Conversation({ character, conversationId }: { character: Character; conversationId: string }) {
  const history = useLoad(() => api.get<{ messages: Message[] }>(`/conversations/${enc(conversationId)}`), conversationId);
  const capabilities = useLoad(() => api.get<Capability[]>('/capabilities?limit=1000'), 'capabilities');
  const documents = useLoad(() => api.get<TroupeDocument[]>(`/characters/${enc(character.id)}/documents?limit=1000`), character.id);
  const [log, setLog] = useState<LogItem[]>([]);
  const [state, setState] = useState<'connecting' | 'open' | 'closed'>('connecting');
  const [text, setText] = useState('');
  const [analysis, setAnalysis] = useState(false);
  const socket = useRef<WebSocket | null>(null);
  const modes = useRef<boolean[]>([]);
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    if (history.data) setLog(fromHistory(history.data.messages));
  }, [history.data]);

  // The socket opens once the history is shown, so no event lands before it and is overwritten.
  const loaded = history.data !== null;
  useEffect(() => {
    if (!loaded) return;
    setState('connecting');
    const ws = new WebSocket(socketUrl(`/conversations/${enc(conversationId)}/ws`));
    socket.current = ws;
    ws.onmessage = (message) => {
      const event = JSON.parse(String(message.data)) as { type: string };
      if (event.type === 'ready') setState('open');
      else setLog((current) => applyEvent(current, event, () => modes.current.shift() ?? false));
    };
    ws.onclose = () => setState('closed');
    return () => ws.close();
  }, [conversationId, attempt, loaded]);

  const send = (event: Event) => {
    event.preventDefault();
    const content = text.trim();
    if (!content || !socket.current || state !== 'open') return;
    const mode = analysis ? 'analysis' : 'conversation';
    modes.current.push(analysis);
    socket.current.send(JSON.stringify({ content, mode }));
    setLog((current) => [...current, { kind: 'player', key: `sent-${current.length}`, text: content, analysis }]);
    setText('');
  };

  const answer = (callId: string, result: unknown) => {
    socket.current?.send(JSON.stringify({ type: 'capability_result', callId, result }));
    setLog((current) => current.map((i) => (i.kind === 'capability' && i.callId === callId ? { ...i, answered: JSON.stringify(result) } : i)));
  };

  return (
    <div class="conversation stack">
      <p class="muted">
        Conversation {conversationId} ·{' '}
        <span role="status">{state === 'open' ? 'connected' : state === 'connecting' ? 'connecting…' : 'disconnected'}</span>
        {state === 'closed' && (
          <button type="button" class="quiet" onClick={() => setAttempt((n) => n + 1)}>
            Reconnect
          </button>
        )}
      </p>
      <ErrorNote error={history.error} />
      <ChatLog
        log={log}
        characterName={character.name}
        capabilities={capabilities.data ?? []}
        documents={documents.data ?? []}
        onAnswer={answer}
      />
      <form class="composer" onSubmit={send}>
        <label class="field grow">
          <span class="label">{analysis ? 'Ask about the conversation (not stored)' : `Say something to ${character.name}`}</span>
          <textarea
            name="message"
            rows={2}
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && !e.shiftKey) send(e);
            }}
          />
        </label>
        <label class="check">
          <input type="checkbox" checked={analysis} onChange={(e) => setAnalysis(e.currentTarget.checked)} />
          Analysis mode
        </label>
        <button type="submit" class="primary" disabled={state !== 'open' || text.trim() === ''}>
          Send
        </button>
      </form>
    </div>
  );
}
