import { z } from 'zod';
import {
  AttachCapabilitySchema,
  CharacterSchema,
  CreateCharacterSchema,
  UpdateCharacterSchema,
} from '../../characters/schemas.ts';
import { DeletedSchema, IdParam } from '../common-schemas.ts';
import { PageQuerySchema, nextLink, toPage } from '../pagination.ts';
import { defineRoute } from '../route.ts';

const tags = ['Characters'];
const CharacterParams = z.strictObject({ characterId: IdParam });

export const characterRoutes = [
  defineRoute({
    method: 'POST',
    path: '/characters',
    auth: 'key',
    tags,
    summary: 'Create a character',
    body: CreateCharacterSchema,
    response: { status: 201, schema: CharacterSchema, description: 'The created character' },
    handler: async ({ body, principal, resources }) => ({
      body: await resources.characters.create(principal.projectId, body),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/characters',
    auth: 'key',
    tags,
    summary: 'List characters in creation order',
    query: PageQuerySchema,
    response: { status: 200, schema: z.array(CharacterSchema), description: 'Characters of the project' },
    handler: async ({ query, principal, resources, path }) => {
      const page = toPage(query);
      const items = await resources.characters.list(principal.projectId, page);
      return { body: items, headers: nextLink(path, page, items) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/characters/:characterId',
    auth: 'key',
    tags,
    summary: 'Retrieve a character',
    params: CharacterParams,
    response: { status: 200, schema: CharacterSchema, description: 'The character' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.characters.get(principal.projectId, params.characterId),
    }),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/characters/:characterId',
    auth: 'key',
    tags,
    summary: 'Update a character; only supplied fields change',
    params: CharacterParams,
    body: UpdateCharacterSchema,
    response: { status: 200, schema: CharacterSchema, description: 'The updated character' },
    errors: [404],
    handler: async ({ params, body, principal, resources }) => ({
      body: await resources.characters.update(principal.projectId, params.characterId, body),
    }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/characters/:characterId',
    auth: 'key',
    tags,
    summary: 'Delete a character and everything that belongs to it',
    params: CharacterParams,
    response: { status: 200, schema: DeletedSchema, description: 'Deletion confirmation' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.characters.delete(principal.projectId, params.characterId),
    }),
  }),
  defineRoute({
    method: 'POST',
    path: '/characters/:characterId/capabilities',
    auth: 'key',
    tags,
    summary: 'Attach a capability to a character (attaching it again changes nothing)',
    params: CharacterParams,
    body: AttachCapabilitySchema,
    response: { status: 200, schema: CharacterSchema, description: 'The character with the capability attached' },
    errors: [404],
    handler: async ({ params, body, principal, resources }) => ({
      body: await resources.characters.attachCapability(principal.projectId, params.characterId, body.capabilityId),
    }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/characters/:characterId/capabilities/:capabilityId',
    auth: 'key',
    tags,
    summary: 'Detach a capability from a character',
    params: z.strictObject({ characterId: IdParam, capabilityId: IdParam }),
    response: { status: 200, schema: CharacterSchema, description: 'The character without the capability' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.characters.detachCapability(principal.projectId, params.characterId, params.capabilityId),
    }),
  }),
];
