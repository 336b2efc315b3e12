import { useState } from 'preact/hooks';
import type { LogItem } from '../lib/conversation.ts';
import type { Capability, TroupeDocument } from '../lib/types.ts';
import { useFollow } from '../ui.tsx';

export function ChatLog(props: {
  log: LogItem[];
  characterName: string;
  capabilities: Capability[];
  documents: TroupeDocument[];
  onAnswer: (callId: string, result: unknown) => void;
}) {
  const follow = useFollow<HTMLOListElement>(props.log);
  if (props.log.length === 0) return <p class="empty">No messages yet. Say hello.</p>;
  return (
    <ol class="log" aria-live="polite" aria-label="Conversation" ref={follow}>
      {props.log.map((item) => {
        switch (item.kind) {
          case 'player':
            return (
              <li key={item.key} class={`bubble player${item.analysis ? ' analysis' : ''}`}>
                <span class="who">{item.analysis ? 'You (analysis)' : 'You'}</span>
                <p>{item.text}</p>
              </li>
            );
          case 'character':
            return (
              <li key={item.key} class={`bubble character${item.analysis ? ' analysis' : ''}`} aria-busy={!item.done}>
                <span class="who">{item.analysis ? 'Analysis' : props.characterName}</span>
                <p>{item.text}</p>
                {item.citations.length > 0 && (
                  <details class="citations" open>
                    <summary>Sources ({item.citations.length})</summary>
                    <ul>
                      {item.citations.map((c) => (
                        <li key={c.chunkId}>
                          <strong>{props.documents.find((d) => d.id === c.documentId)?.name ?? c.documentId}</strong>
                          <blockquote>{c.excerpt}</blockquote>
                        </li>
                      ))}
                    </ul>
                  </details>
                )}
              </li>
            );
          case 'capability':
            return <CapabilityCard key={item.key} item={item} capability={props.capabilities.find((c) => c.name === item.name)} onAnswer={props.onAnswer} />;
          case 'error':
            return (
              <li key={item.key} class="error" role="alert">
                {item.message}
                {item.code && <span class="code"> ({item.code})</span>}
              </li>
            );
        }
      })}
    </ol>
  );
}

function CapabilityCard(props: { item: Extract<LogItem, { kind: 'capability' }>; capability: Capability | undefined; onAnswer: (callId: string, result: unknown) => void }) {
  const { item, capability } = props;
  const [result, setResult] = useState('{}');
  const [invalid, setInvalid] = useState<string | null>(null);
  const expectsResult = capability?.type === 'client_function_call';
  return (
    <li class="card capability" aria-label={`Capability call ${item.name}`}>
      <div>
        <strong>{item.name}</strong> <span class="muted">{capability?.type ?? 'capability'} · {item.callId}</span>
      </div>
      <pre>{JSON.stringify(item.params, null, 2)}</pre>
      {expectsResult && item.answered === null && (
        <form
          class="stack"
          onSubmit={(e) => {
            e.preventDefault();
            try {
              props.onAnswer(item.callId, JSON.parse(result));
            } catch (err) {
              setInvalid(`Not valid JSON: ${(err as Error).message}`);
            }
          }}
        >
          <label class="field">
            <span class="label">Result (JSON) for {item.name}</span>
            <textarea rows={3} value={result} onInput={(e) => {
              setResult(e.currentTarget.value);
              setInvalid(null);
            }} />
          </label>
          {invalid && <p class="error" role="alert">{invalid}</p>}
          <button type="submit" class="primary">
            Send result
          </button>
        </form>
      )}
      {item.answered !== null && <p class="muted">Answered with {item.answered}</p>}
      {!expectsResult && <p class="muted">Fired; the character goes on without a result.</p>}
    </li>
  );
}
