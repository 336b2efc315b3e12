import { z } from 'zod';
import { ErrorSchema } from './common-schemas.ts';
import type { Route } from './route.ts';

const ERROR_TEXT: Record<number, string> = {
  400: 'Invalid request: the body names the field and why',
  401: 'Missing or invalid credentials',
  404: 'Not found (ids of other projects answer the same)',
  405: 'Method not allowed on this path',
  409: 'Conflict with an existing resource',
  413: 'Request body over the size limit',
  415: 'Unsupported content type',
  500: 'Server error; the body carries the request id',
  503: 'Not ready',
};

/**
 * Builds the OpenAPI 3.1 document from the same zod schemas the routes validate with, so the
 * description cannot drift from what the server accepts.
 */
export function buildOpenApi(routes: readonly Route[], version: string): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const toSchema = (schema: z.ZodType, io: 'input' | 'output') => toComponentSchema(schema, io, components);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const operation: Record<string, unknown> = {
      operationId: operationId(route),
      summary: route.summary,
      tags: route.tags,
      parameters: [...parameters(route.params, 'path', toSchema), ...parameters(route.query, 'query', toSchema)],
      responses: responses(route, toSchema),
    };
    if (route.auth === 'key' || route.auth === 'key-or-agent') operation.security = [{ apiKey: [] }];
    if (route.auth === 'admin') operation.security = [{ adminToken: [] }];
    if (route.body) {
      operation.requestBody = {
        required: true,
        content: { 'application/json': { schema: toSchema(route.body, 'input') } },
      };
    } else if (route.rawRequest) {
      operation.requestBody = { required: true, content: { [route.rawRequest.contentType]: { schema: route.rawRequest.schema } } };
    }
    (paths[path] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Troupe',
      version,
      description: 'Hosts AI characters for games: characters, capabilities, conversations, an OpenAI-compatible /v1 and perform.',
    },
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'A project API key, sk-troupe-...' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'TROUPE_ADMIN_TOKEN' },
      },
      schemas: { ...components, Error: toSchema(ErrorSchema, 'output') },
    },
  };
}

type ToSchema = (schema: z.ZodType, io: 'input' | 'output') => Record<string, unknown>;

function responses(route: Route, toSchema: ToSchema): Record<string, unknown> {
  const success: Record<string, unknown> = { description: route.response.description };
  if (route.response.schema) {
    success.content = { 'application/json': { schema: toSchema(route.response.schema, 'output') } };
  } else if (route.response.contentType) {
    success.content = { [route.response.contentType]: { schema: { type: 'string' } } };
  }
  const statuses = new Set<number>([...route.errors, 500]);
  if (route.auth !== 'none') statuses.add(401);
  if (route.params || route.query || route.body) statuses.add(400);
  if (route.body) {
    statuses.add(413);
    statuses.add(415);
  }
  const out: Record<string, unknown> = { [String(route.response.status)]: success };
  for (const status of [...statuses].sort()) {
    out[String(status)] = {
      description: ERROR_TEXT[status] ?? 'Error',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  return out;
}

function parameters(schema: z.ZodType | undefined, where: 'path' | 'query', toSchema: ToSchema): unknown[] {
  if (!schema) return [];
  const json = toSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    schema: property,
  }));
}

/** zod puts schemas with a `meta({id})` in `$defs`; they become shared components. */
function toComponentSchema(schema: z.ZodType, io: 'input' | 'output', components: Record<string, unknown>): Record<string, unknown> {
  const raw = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' });
  const json = JSON.parse(JSON.stringify(raw).replaceAll('"#/$defs/', '"#/components/schemas/')) as Record<string, unknown>;
  delete json.$schema;
  const defs = json.$defs as Record<string, unknown> | undefined;
  delete json.$defs;
  if (defs) Object.assign(components, defs);
  if (typeof json.id === 'string' && io === 'output') {
    const { id, ...rest } = json;
    components[id] = rest;
    return { $ref: `#/components/schemas/${id}` };
  }
  return json;
}

function operationId(route: Route): string {
  const words = route.path
    .split('/')
    .filter(Boolean)
    .map((s) => (s.startsWith(':') ? 'By' + capitalize(s.slice(1)) : capitalize(s.replace(/[^A-Za-z0-9]/g, ''))));
  return route.method.toLowerCase() + words.join('');
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
