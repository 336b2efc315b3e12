import { z } from 'zod';
import { IdParam } from '../common-schemas.ts';
import { PageQuerySchema, nextLink, toPage } from '../pagination.ts';
import { defineRoute } from '../route.ts';

const tags = ['Admin'];

const ProjectSchema = z.object({ id: z.string(), name: z.string(), createdAt: z.iso.datetime() }).meta({ id: 'Project' });

const CreatedKeySchema = z
  .object({
    id: z.string(),
    key: z.string().describe('The secret, shown only in this response'),
    projectId: z.string(),
    name: z.string().nullable(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'CreatedApiKey' });

const KeyInfoSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    name: z.string().nullable(),
    prefix: z.string().describe('First characters of the key, to tell keys apart'),
    createdAt: z.iso.datetime(),
    revokedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ApiKey' });

const ProjectParams = z.strictObject({ projectId: IdParam });

/** "Project settings": enabled only when TROUPE_ADMIN_TOKEN is set, authenticated with it. */
export const adminRoutes = [
  defineRoute({
    method: 'POST',
    path: '/admin/projects',
    auth: 'admin',
    tags,
    summary: 'Create a project',
    body: z.strictObject({ name: z.string().trim().min(1).max(200) }),
    response: { status: 201, schema: ProjectSchema, description: 'The created project' },
    handler: async ({ body, resources }) => ({ body: await resources.projects.createProject(body.name) }),
  }),
  defineRoute({
    method: 'GET',
    path: '/admin/projects',
    auth: 'admin',
    tags,
    summary: 'List projects',
    query: PageQuerySchema,
    response: { status: 200, schema: z.array(ProjectSchema), description: 'Projects' },
    handler: async ({ query, resources, path }) => {
      const page = toPage(query);
      const items = await resources.projects.listProjects(page);
      return { body: items, headers: nextLink(path, page, items) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/admin/projects/:projectId',
    auth: 'admin',
    tags,
    summary: 'Retrieve a project with the secret that signs its capability webhooks',
    params: ProjectParams,
    response: {
      status: 200,
      schema: ProjectSchema.extend({ webhookSecret: z.string().describe('HMAC-SHA256 key of x-troupe-signature') }),
      description: 'The project',
    },
    errors: [404],
    handler: async ({ params, resources }) => ({
      body: { ...(await resources.projects.getProject(params.projectId)), webhookSecret: await resources.projects.webhookSecret(params.projectId) },
    }),
  }),
  defineRoute({
    method: 'POST',
    path: '/admin/projects/:projectId/keys',
    auth: 'admin',
    tags,
    summary: 'Create an API key; the secret is returned only here',
    params: ProjectParams,
    body: z.strictObject({ name: z.string().trim().min(1).max(200).nullable().default(null) }),
    response: { status: 201, schema: CreatedKeySchema, description: 'The key, with its secret' },
    errors: [404],
    handler: async ({ params, body, resources }) => ({
      body: await resources.projects.createKey(params.projectId, body.name),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/admin/projects/:projectId/keys',
    auth: 'admin',
    tags,
    summary: 'List the API keys of a project (no secrets)',
    params: ProjectParams,
    query: PageQuerySchema,
    response: { status: 200, schema: z.array(KeyInfoSchema), description: 'Keys, revoked ones included' },
    errors: [404],
    handler: async ({ params, query, resources, path }) => {
      const page = toPage(query);
      const items = await resources.projects.listKeys(params.projectId, page);
      return { body: items, headers: nextLink(path, page, items) };
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/admin/keys/:keyId',
    auth: 'admin',
    tags,
    summary: 'Revoke an API key; it stops working at once, in every process',
    params: z.strictObject({ keyId: IdParam }),
    response: { status: 200, schema: KeyInfoSchema, description: 'The revoked key' },
    errors: [404],
    handler: async ({ params, resources }) => ({ body: await resources.projects.revokeKey(params.keyId) }),
  }),
];
