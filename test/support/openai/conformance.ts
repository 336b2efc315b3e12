// Checks JSON against the component schemas of OpenAI's own OpenAPI document, so "OpenAI
// compatible" is measured against the published contract rather than against our reading of it.
//
// The document says `openapi: 3.1.0` (JSON Schema 2020-12: `type: "null"` in anyOf), yet still
// carries OpenAPI 3.0 leftovers: `nullable: true` (e.g. a stream chunk's `finish_reason`), and
// two 2019-09 `$recursiveRef`s. Read literally as 3.1, `nullable` is an unknown annotation and
// every non-final chunk (finish_reason null) would fail, which is plainly not the intent; so
// `nullable: true` becomes `anyOf: [schema, {type: "null"}]`. Nothing else is relaxed.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import formatsModule from 'ajv-formats';
import { load } from 'js-yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const REQUIRED_PATH = process.env.OPENAI_CONFORMANCE_YAML;
/** The project's shared/ folder sits beside the repository (as CI checks it out); OPENAI_CONFORMANCE_YAML overrides. */
export const OPENAPI_PATH = REQUIRED_PATH ?? path.resolve(ROOT, '..', 'shared', 'conformance', 'openai-openapi.yaml');
/**
 * The checks run when the document is there. A fresh clone has no shared/ beside it, so there
 * they are skipped (the behaviour tests still run); setting OPENAI_CONFORMANCE_YAML, as CI does,
 * makes the document required: a wrong path then fails every check instead of skipping them.
 */
export const CONFORMANCE_AVAILABLE = REQUIRED_PATH !== undefined || existsSync(OPENAPI_PATH);

/** Component names in the document for the objects Troupe's /v1 sends or forwards. */
export const SCHEMAS = {
  chatCompletion: 'CreateChatCompletionResponse',
  chatCompletionChunk: 'CreateChatCompletionStreamResponse',
  chatCompletionRequest: 'CreateChatCompletionRequest',
  modelList: 'ListModelsResponse',
  model: 'Model',
  errorBody: 'ErrorResponse',
  embeddingList: 'CreateEmbeddingResponse',
} as const;

const ID_BASE = 'https://conformance.troupe.invalid/openai/';
const REF_PREFIX = '#/components/schemas/';
/** Keywords whose value is a map from names to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas']);
/** Keywords whose value is a schema or an array of schemas. */
const SCHEMA_VALUES = new Set([
  'items', 'prefixItems', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'not', 'if', 'then', 'else',
  'contains', 'propertyNames', 'anyOf', 'oneOf', 'allOf',
]);

export class ConformanceError extends Error {
  readonly schema: string;
  readonly violations: string[];
  constructor(schema: string, violations: string[]) {
    super(`${schema}: ${violations.length} violation(s)\n  ${violations.join('\n  ')}`);
    this.name = 'ConformanceError';
    this.schema = schema;
    this.violations = violations;
  }
}

export interface ConformanceTimings {
  /** Reading and parsing the YAML document, once per process. */
  parseMs: number;
  /** Per component schema: converting its closure, adding it to Ajv and compiling. */
  compileMs: Record<string, number>;
}

interface State {
  components: Record<string, unknown>;
  ajv: Ajv2020;
  added: Set<string>;
  validators: Map<string, ValidateFunction>;
  timings: ConformanceTimings;
}

let state: State | undefined;

function loadState(): State {
  if (state) return state;
  const started = performance.now();
  if (!existsSync(OPENAPI_PATH)) {
    throw new Error(`The OpenAI conformance document is not at ${OPENAPI_PATH}: check out shared/ beside the repository, or set OPENAI_CONFORMANCE_YAML to its path.`);
  }
  const doc = load(readFileSync(OPENAPI_PATH, 'utf8')) as { openapi?: unknown; components?: { schemas?: Record<string, unknown> } };
  if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.1')) {
    // The conversion below assumes 3.1 with 3.0 leftovers; a 3.0 document needs a different one.
    throw new Error(`${OPENAPI_PATH}: expected OpenAPI 3.1, found ${String(doc.openapi)}`);
  }
  const components = doc.components?.schemas;
  if (!components) throw new Error(`${OPENAPI_PATH}: no components.schemas`);
  // strictTypes is off because the document often omits `type: object` beside `properties`; that
  // only silences a lint of the schema itself, no instance is judged differently.
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, discriminator: true });
  formatsModule.default(ajv, ['uri', 'date']);
  // OpenAPI's own formats. unixtime must be whole seconds: milliseconds are a common
  // compatible-server bug that `type: integer` alone would let through.
  ajv.addFormat('unixtime', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= 0 && n < 1e11 });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat('float', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  ajv.addFormat('binary', { type: 'string', validate: () => true });
  state = {
    components,
    ajv,
    added: new Set(),
    validators: new Map(),
    timings: { parseMs: performance.now() - started, compileMs: {} },
  };
  return state;
}

/** Turns one OpenAPI schema node into JSON Schema 2020-12 that Ajv accepts in strict mode. */
function toJsonSchema(node: unknown, refs: Set<string>): unknown {
  if (Array.isArray(node)) return node.map((item) => toJsonSchema(item, refs));
  if (typeof node !== 'object' || node === null) return node;
  const source = node as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    // Vendor extensions and `example` are documentation; `nullable` is handled below.
    if (key.startsWith('x-') || key === 'example' || key === 'nullable' || key === '$recursiveAnchor') continue;
    if (key === '$ref') {
      if (typeof value !== 'string' || !value.startsWith(REF_PREFIX)) throw new Error(`unsupported $ref ${String(value)}`);
      const name = value.slice(REF_PREFIX.length);
      refs.add(name);
      out.$ref = ID_BASE + name;
    } else if (key === '$recursiveRef') {
      // Each component is its own schema resource, so "#" is the component itself.
      out.$ref = value;
    } else if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, toJsonSchema(schema, refs)]));
    } else if (SCHEMA_VALUES.has(key)) {
      out[key] = toJsonSchema(value, refs);
    } else {
      out[key] = value; // keywords whose values are data: enum, required, default, discriminator…
    }
  }
  return source.nullable === true ? { anyOf: [out, { type: 'null' }] } : out;
}

/** Adds a component and every component it references, each as its own schema resource. */
function addComponent(s: State, name: string): void {
  const pending = [name];
  while (pending.length > 0) {
    const next = pending.pop() as string;
    if (s.added.has(next)) continue;
    const raw = s.components[next];
    if (raw === undefined) throw new Error(`${OPENAPI_PATH}: no component schema named ${next}`);
    const refs = new Set<string>();
    const schema = toJsonSchema(raw, refs) as Record<string, unknown>;
    s.ajv.addSchema({ ...schema, $id: ID_BASE + next });
    s.added.add(next);
    pending.push(...refs);
  }
}

function validatorFor(name: string): ValidateFunction {
  const s = loadState();
  const cached = s.validators.get(name);
  if (cached) return cached;
  const started = performance.now();
  addComponent(s, name);
  const validate = s.ajv.getSchema(ID_BASE + name);
  if (!validate) throw new Error(`could not compile ${name}`);
  s.validators.set(name, validate);
  s.timings.compileMs[name] = performance.now() - started;
  return validate;
}

function formatError(error: ErrorObject): string {
  const where = error.instancePath || '(root)';
  const params = error.params as Record<string, unknown>;
  const extra = Array.isArray(params.allowedValues) ? ` (${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')})` : '';
  return `${where} ${error.message ?? error.keyword}${extra} [schema ${error.schemaPath}]`;
}

/** Every violation of a component schema, as "JSON pointer message" lines; empty when valid. */
export function conformanceErrors(schema: string, value: unknown): string[] {
  const validate = validatorFor(schema);
  if (validate(value)) return [];
  return [...new Set((validate.errors ?? []).map(formatError))];
}

/** Throws a ConformanceError listing every violation. */
export function assertConforms(schema: string, value: unknown): void {
  if (!CONFORMANCE_AVAILABLE) return;
  const violations = conformanceErrors(schema, value);
  if (violations.length > 0) throw new ConformanceError(schema, violations);
}

export const validateChatCompletion = (value: unknown): void => assertConforms(SCHEMAS.chatCompletion, value);
export const validateChatCompletionChunk = (value: unknown): void => assertConforms(SCHEMAS.chatCompletionChunk, value);
export const validateChatCompletionRequest = (value: unknown): void => assertConforms(SCHEMAS.chatCompletionRequest, value);
export const validateModelList = (value: unknown): void => assertConforms(SCHEMAS.modelList, value);
export const validateModel = (value: unknown): void => assertConforms(SCHEMAS.model, value);
export const validateErrorBody = (value: unknown): void => assertConforms(SCHEMAS.errorBody, value);
export const validateEmbeddingList = (value: unknown): void => assertConforms(SCHEMAS.embeddingList, value);

/** Compiles the schemas up front (e.g. in beforeAll, so the first test is not charged for it). */
export function warmUpConformance(schemas: readonly string[] = Object.values(SCHEMAS)): ConformanceTimings {
  if (!CONFORMANCE_AVAILABLE) return { parseMs: 0, compileMs: {} };
  for (const schema of schemas) validatorFor(schema);
  return conformanceTimings();
}

export function conformanceTimings(): ConformanceTimings {
  const s = loadState();
  return { parseMs: s.timings.parseMs, compileMs: { ...s.timings.compileMs } };
}
