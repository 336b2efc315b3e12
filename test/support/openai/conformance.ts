// Checks JSON against the component schemas of OpenAI's own OpenAPI document, so "OpenAI
// compatible" is measured against the published contract rather than against our reading of it.
//
// The document says `openapi: 3.1.0` (JSON Schema 2020-12: `type: "null"` in anyOf), yet still
// carries OpenAPI 3.0 leftovers: `nullable: true` (e.g. a stream chunk's `finish_reason`), and
// two 2019-09 `$recursiveRef`s. Read literally as 3.1, `nullable` is an unknown annotation and
// every non-final chunk (finish_reason null) would fail, which is plainly not the intent; so
// `nullable: true` becomes `anyOf: [schema, {type: "null"}]`. Nothing else is relaxed.
//
// Two hints Ajv cannot read are left to it to skip, neither judging any instance differently:
// `required` naming a property that a sibling `allOf` branch defines (the Responses schemas are
// built that way; Ajv's strictRequired is a lint of the schema), and OpenAPI's `discriminator`
// where Ajv's implementation cannot use it (an `anyOf`, a branch whose `type` sits behind
// `allOf` or is optional, a tag value two branches share). A discriminator says the tag picks
// the one branch to validate against, so branches overlapping elsewhere do not matter; that
// `oneOf` is read as `anyOf` (e.g. a user message matches both EasyInputMessage and
// InputMessage, which differ in their optional `type`), which still needs a branch to match.
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
  response: 'Response',
  responseCreateRequest: 'CreateResponse',
  /** The union of every Responses stream event; each event is also checked against its own schema below. */
  responseStreamEvent: 'ResponseStreamEvent',
  responseCreatedEvent: 'ResponseCreatedEvent',
  responseInProgressEvent: 'ResponseInProgressEvent',
  responseCompletedEvent: 'ResponseCompletedEvent',
  responseIncompleteEvent: 'ResponseIncompleteEvent',
  responseFailedEvent: 'ResponseFailedEvent',
  responseErrorEvent: 'ResponseErrorEvent',
  responseOutputItemAddedEvent: 'ResponseOutputItemAddedEvent',
  responseOutputItemDoneEvent: 'ResponseOutputItemDoneEvent',
  responseContentPartAddedEvent: 'ResponseContentPartAddedEvent',
  responseContentPartDoneEvent: 'ResponseContentPartDoneEvent',
  responseTextDeltaEvent: 'ResponseTextDeltaEvent',
  responseTextDoneEvent: 'ResponseTextDoneEvent',
  responseRefusalDeltaEvent: 'ResponseRefusalDeltaEvent',
  responseRefusalDoneEvent: 'ResponseRefusalDoneEvent',
  responseFunctionCallArgumentsDeltaEvent: 'ResponseFunctionCallArgumentsDeltaEvent',
  responseFunctionCallArgumentsDoneEvent: 'ResponseFunctionCallArgumentsDoneEvent',
} as const;

/** The component of each Responses stream event type Troupe sends. */
export const RESPONSE_EVENT_SCHEMAS: Readonly<Record<string, string>> = {
  'response.created': SCHEMAS.responseCreatedEvent,
  'response.in_progress': SCHEMAS.responseInProgressEvent,
  'response.completed': SCHEMAS.responseCompletedEvent,
  'response.incomplete': SCHEMAS.responseIncompleteEvent,
  'response.failed': SCHEMAS.responseFailedEvent,
  error: SCHEMAS.responseErrorEvent,
  'response.output_item.added': SCHEMAS.responseOutputItemAddedEvent,
  'response.output_item.done': SCHEMAS.responseOutputItemDoneEvent,
  'response.content_part.added': SCHEMAS.responseContentPartAddedEvent,
  'response.content_part.done': SCHEMAS.responseContentPartDoneEvent,
  'response.output_text.delta': SCHEMAS.responseTextDeltaEvent,
  'response.output_text.done': SCHEMAS.responseTextDoneEvent,
  'response.refusal.delta': SCHEMAS.responseRefusalDeltaEvent,
  'response.refusal.done': SCHEMAS.responseRefusalDoneEvent,
  'response.function_call_arguments.delta': SCHEMAS.responseFunctionCallArgumentsDeltaEvent,
  'response.function_call_arguments.done': SCHEMAS.responseFunctionCallArgumentsDoneEvent,
};

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
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictRequired: false, discriminator: true });
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
function toJsonSchema(node: unknown, refs: Set<string>, components: Record<string, unknown>): unknown {
  if (Array.isArray(node)) return node.map((item) => toJsonSchema(item, refs, components));
  if (typeof node !== 'object' || node === null) return node;
  const source = node as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    // Vendor extensions and `example` are documentation; `nullable` is handled below.
    if (key.startsWith('x-') || key === 'example' || key === 'nullable' || key === '$recursiveAnchor') continue;
    if (key === 'discriminator' && !ajvCanDiscriminate(source, components)) continue;
    if (key === 'oneOf' && source.discriminator !== undefined && source.anyOf === undefined && !ajvCanDiscriminate(source, components)) {
      out.anyOf = toJsonSchema(value, refs, components);
      continue;
    }
    if (key === '$ref') {
      if (typeof value !== 'string' || !value.startsWith(REF_PREFIX)) throw new Error(`unsupported $ref ${String(value)}`);
      const name = value.slice(REF_PREFIX.length);
      refs.add(name);
      out.$ref = ID_BASE + name;
    } else if (key === '$recursiveRef') {
      // Each component is its own schema resource, so "#" is the component itself.
      out.$ref = value;
    } else if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, toJsonSchema(schema, refs, components)]));
    } else if (SCHEMA_VALUES.has(key)) {
      out[key] = toJsonSchema(value, refs, components);
    } else {
      out[key] = value; // keywords whose values are data: enum, required, default, discriminator…
    }
  }
  return source.nullable === true ? { anyOf: [out, { type: 'null' }] } : out;
}

/**
 * Whether Ajv's `discriminator` keyword can be applied to this schema: it needs a `oneOf` whose
 * every branch (through `$ref`) has the tag among its own `properties` as a `const` or `enum`,
 * required, with no value claimed by two branches.
 */
function ajvCanDiscriminate(source: Record<string, unknown>, components: Record<string, unknown>): boolean {
  const discriminator = source.discriminator as { propertyName?: unknown; mapping?: unknown } | undefined;
  if (!Array.isArray(source.oneOf) || typeof discriminator?.propertyName !== 'string' || discriminator.mapping !== undefined) return false;
  const tag = discriminator.propertyName;
  const topRequired = Array.isArray(source.required) && source.required.includes(tag);
  const values = new Set<unknown>();
  return source.oneOf.every((branch: unknown) => {
    let schema = branch as Record<string, unknown> | undefined;
    for (let hops = 0; typeof schema?.$ref === 'string' && hops < 10; hops++) {
      schema = components[schema.$ref.slice(REF_PREFIX.length)] as Record<string, unknown> | undefined;
    }
    const property = (schema?.properties as Record<string, Record<string, unknown>> | undefined)?.[tag];
    const required = topRequired || (Array.isArray(schema?.required) && schema.required.includes(tag));
    const tags: unknown[] = property?.const !== undefined ? [property.const] : Array.isArray(property?.enum) ? property.enum : [];
    if (!required || tags.length === 0) return false;
    for (const value of tags) {
      if (typeof value !== 'string' || values.has(value)) return false;
      values.add(value);
    }
    return true;
  });
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
    const schema = toJsonSchema(raw, refs, s.components) as Record<string, unknown>;
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
export const validateResponse = (value: unknown): void => assertConforms(SCHEMAS.response, value);
/**
 * A Responses stream event against the schema of its own type (readable violations) and the
 * union of all events; an event type Troupe does not send fails.
 */
export function validateResponseStreamEvent(value: unknown): void {
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  const schema = typeof type === 'string' ? RESPONSE_EVENT_SCHEMAS[type] : undefined;
  if (!schema) throw new ConformanceError(SCHEMAS.responseStreamEvent, [`(root) unexpected event type ${JSON.stringify(type)}`]);
  assertConforms(schema, value);
  assertConforms(SCHEMAS.responseStreamEvent, value);
}
export const validateResponseCreateRequest = (value: unknown): void => assertConforms(SCHEMAS.responseCreateRequest, value);

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
