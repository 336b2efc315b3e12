import type { Parameter, ParameterType } from '../lib/types.ts';
import { Empty } from '../ui.tsx';

const TYPES: ParameterType[] = ['string', 'number', 'integer', 'boolean'];

/** The capability's parameters, one row each: name, type, description, required. */
export function ParameterEditor({ parameters, onChange }: { parameters: Parameter[]; onChange: (p: Parameter[]) => void }) {
  const update = (index: number, change: Partial<Parameter>) => onChange(parameters.map((p, i) => (i === index ? { ...p, ...change } : p)));
  return (
    <fieldset class="parameters">
      <legend>Parameters</legend>
      {parameters.length === 0 && <Empty>No parameters: the call carries no arguments.</Empty>}
      {parameters.map((p, i) => (
        <div class="parameter" key={i} role="group" aria-label={`Parameter ${i + 1}`}>
          <label class="field">
            <span class="label">Name</span>
            <input required pattern="[a-zA-Z_][a-zA-Z0-9_]{0,63}" value={p.name} onInput={(e) => update(i, { name: e.currentTarget.value })} />
          </label>
          <label class="field">
            <span class="label">Type</span>
            <select value={p.type} onChange={(e) => update(i, { type: e.currentTarget.value as ParameterType })}>
              {TYPES.map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          </label>
          <label class="field grow">
            <span class="label">Description</span>
            <input value={p.description ?? ''} onInput={(e) => update(i, { description: e.currentTarget.value })} />
          </label>
          <label class="check">
            <input type="checkbox" checked={p.required} onChange={(e) => update(i, { required: e.currentTarget.checked })} />
            Required
          </label>
          <button type="button" aria-label={`Remove parameter ${p.name || i + 1}`} onClick={() => onChange(parameters.filter((_, j) => j !== i))}>
            Remove
          </button>
        </div>
      ))}
      <button type="button" onClick={() => onChange([...parameters, { name: '', type: 'string', description: null, required: false }])}>
        Add parameter
      </button>
    </fieldset>
  );
}
