import type { ParameterDefinition } from '../db/schema.ts';

export type ArgumentCheck = { ok: true; params: Record<string, unknown> } | { ok: false; problem: string };

/**
 * Checks a model's call arguments against a capability's parameter definitions before anything
 * is delivered or called: a JSON object, required parameters present, types right, nothing else.
 */
export function checkArguments(definitions: readonly ParameterDefinition[], raw: string | Record<string, unknown>): ArgumentCheck {
  let value: unknown = raw;
  if (typeof raw === 'string') {
    try {
      value = raw.trim() === '' ? {} : JSON.parse(raw);
    } catch {
      return { ok: false, problem: 'the arguments are not valid JSON' };
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, problem: 'the arguments are not a JSON object' };
  const params = value as Record<string, unknown>;
  const known = new Map(definitions.map((d) => [d.name, d]));
  for (const name of Object.keys(params)) {
    if (!known.has(name)) return { ok: false, problem: `unknown parameter '${name}'` };
  }
  for (const definition of definitions) {
    const v = params[definition.name];
    if (v === undefined || v === null) {
      if (definition.required) return { ok: false, problem: `missing required parameter '${definition.name}'` };
      continue;
    }
    if (!matches(definition.type, v)) return { ok: false, problem: `parameter '${definition.name}' must be ${definition.type === 'integer' ? 'an integer' : `a ${definition.type}`}` };
  }
  return { ok: true, params };
}

function matches(type: ParameterDefinition['type'], v: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof v === 'string';
    case 'boolean':
      return typeof v === 'boolean';
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
  }
}
