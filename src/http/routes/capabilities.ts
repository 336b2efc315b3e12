import { z } from 'zod';
import { CapabilitySchema, CreateCapabilitySchema, UpdateCapabilitySchema } from '../../capabilities/schemas.ts';
import { DeletedSchema, IdParam } from '../common-schemas.ts';
import { PageQuerySchema, nextLink, toPage } from '../pagination.ts';
import { defineRoute } from '../route.ts';

const tags = ['Capabilities'];
const CapabilityParams = z.strictObject({ capabilityId: IdParam });

export const capabilityRoutes = [
  defineRoute({
    method: 'POST',
    path: '/capabilities',
    auth: 'key',
    tags,
    summary: 'Create a capability',
    body: CreateCapabilitySchema,
    response: { status: 201, schema: CapabilitySchema, description: 'The created capability' },
    errors: [409],
    handler: async ({ body, principal, resources }) => ({
      body: await resources.capabilities.create(principal.projectId, body),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/capabilities',
    auth: 'key',
    tags,
    summary: 'List capabilities in creation order',
    query: PageQuerySchema,
    response: { status: 200, schema: z.array(CapabilitySchema), description: 'Capabilities of the project' },
    handler: async ({ query, principal, resources, path }) => {
      const page = toPage(query);
      const items = await resources.capabilities.list(principal.projectId, page);
      return { body: items, headers: nextLink(path, page, items) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/capabilities/:capabilityId',
    auth: 'key',
    tags,
    summary: 'Retrieve a capability',
    params: CapabilityParams,
    response: { status: 200, schema: CapabilitySchema, description: 'The capability' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.capabilities.get(principal.projectId, params.capabilityId),
    }),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/capabilities/:capabilityId',
    auth: 'key',
    tags,
    summary: 'Update a capability; `parameters` replaces all definitions, `type` cannot change',
    params: CapabilityParams,
    body: UpdateCapabilitySchema,
    response: { status: 200, schema: CapabilitySchema, description: 'The updated capability' },
    errors: [404, 409],
    handler: async ({ params, body, principal, resources }) => ({
      body: await resources.capabilities.update(principal.projectId, params.capabilityId, body),
    }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/capabilities/:capabilityId',
    auth: 'key',
    tags,
    summary: 'Delete a capability and detach it from every character',
    params: CapabilityParams,
    response: { status: 200, schema: DeletedSchema, description: 'Deletion confirmation' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.capabilities.delete(principal.projectId, params.capabilityId),
    }),
  }),
];
