import { cloneElement, type ComponentChildren, type VNode } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import type { ApiError } from './lib/api.ts';
import type { Character } from './lib/types.ts';

/** An API error shown next to what failed, with the server's own message and code. */
export function ErrorNote({ error }: { error: ApiError | null }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error.message}
      {error.code !== 'unknown' && error.code !== 'network_error' && <span class="code"> ({error.code})</span>}
    </p>
  );
}

/** A destructive action that asks once more, in place, before it runs. */
export function ConfirmButton(props: { label: string; question: string; onConfirm: () => void | Promise<void>; busy?: boolean }) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button type="button" class="danger" disabled={props.busy} onClick={() => setAsking(true)}>
        {props.label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={props.question}>
      <span>{props.question}</span>
      <button
        type="button"
        class="danger"
        autoFocus
        onClick={() => {
          setAsking(false);
          void props.onConfirm();
        }}
      >
        Yes, {props.label.toLowerCase()}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/** A labelled control: the label names it, the hint describes it (so the name stays short). */
export function Field(props: { label: string; hint?: string; children: VNode }) {
  const id = useId();
  return (
    <div class="field">
      <label class="label" for={id}>
        {props.label}
      </label>
      {cloneElement(props.children, { id, 'aria-describedby': props.hint ? `${id}-hint` : undefined })}
      {props.hint && (
        <span class="hint" id={`${id}-hint`}>
          {props.hint}
        </span>
      )}
    </div>
  );
}

export function CharacterSelect(props: { characters: Character[]; value: string; onChange: (id: string) => void; label?: string }) {
  return (
    <Field label={props.label ?? 'Character'}>
      <select value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        <option value="">Choose a character…</option>
        {props.characters.map((c) => (
          <option key={c.id} value={c.id}>
            {c.name}
          </option>
        ))}
      </select>
    </Field>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState<'no' | 'yes' | 'failed'>('no');
  return (
    <button
      type="button"
      onClick={() => {
        navigator.clipboard.writeText(text).then(
          () => setCopied('yes'),
          () => setCopied('failed'),
        );
      }}
    >
      {copied === 'yes' ? 'Copied' : copied === 'failed' ? 'Copy failed: select the text' : label}
    </button>
  );
}

/** A scrolling list that follows its newest item, unless the reader scrolled up to read. */
export function useFollow<T extends HTMLElement>(change: unknown) {
  const ref = useRef<T>(null);
  useEffect(() => {
    const el = ref.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 160) el.scrollTop = el.scrollHeight;
  }, [change]);
  return ref;
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}
