import { z } from 'zod';
import { DOCUMENT_MIME_TYPES } from '../../documents/types.ts';
import { DeletedSchema, IdParam } from '../common-schemas.ts';
import { readFilePart } from '../multipart.ts';
import { PageQuerySchema, nextLink, toPage } from '../pagination.ts';
import { defineRoute } from '../route.ts';

/** The interface's upload limit: 50 MB (50 × 1024 × 1024 bytes). */
const MAX_DOCUMENT_BYTES = 50 * 1024 * 1024;

const tags = ['Documents'];
const CharacterParams = z.strictObject({ characterId: IdParam });
const DocumentParams = z.strictObject({ characterId: IdParam, documentId: IdParam });

const DocumentSchema = z
  .object({
    id: z.string(),
    createdAt: z.string(),
    characterId: z.string(),
    name: z.string(),
    mimeType: z.enum(DOCUMENT_MIME_TYPES),
    fileSize: z.number().int(),
    status: z.enum(['pending', 'processing', 'ready', 'failed']),
    chunkCount: z.number().int(),
    errorMessage: z.string().nullable(),
  })
  .meta({ id: 'Document' });

export const documentRoutes = [
  defineRoute({
    method: 'POST',
    path: '/characters/:characterId/documents',
    auth: 'key',
    tags,
    summary: 'Upload a document (multipart/form-data, part `file`, at most 50 MB); processed asynchronously',
    params: CharacterParams,
    response: { status: 202, schema: DocumentSchema, description: 'The document, pending processing' },
    rawRequest: {
      contentType: 'multipart/form-data',
      schema: {
        type: 'object',
        required: ['file'],
        properties: { file: { type: 'string', format: 'binary', description: 'PDF, DOCX, text, Markdown, HTML, PNG, JPEG or WebP; at most 50 MB' } },
      },
    },
    errors: [404, 413, 415],
    handler: async ({ params, principal, resources, headers, rawBody }) => {
      // A missing character answers 404 before a byte of the file is read.
      await resources.documents.assertCharacter(principal.projectId, params.characterId);
      const file = await readFilePart(headers, rawBody, { field: 'file', maxBytes: MAX_DOCUMENT_BYTES });
      const document = await resources.documents.upload(principal.projectId, params.characterId, file);
      resources.documentProcessor.wake();
      return { status: 202, body: document };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/characters/:characterId/documents',
    auth: 'key',
    tags,
    summary: "List a character's documents in upload order",
    params: CharacterParams,
    query: PageQuerySchema,
    response: { status: 200, schema: z.array(DocumentSchema), description: 'Documents of the character' },
    errors: [404],
    handler: async ({ params, query, principal, resources, path }) => {
      const page = toPage(query);
      const items = await resources.documents.list(principal.projectId, params.characterId, page);
      return { body: items, headers: nextLink(path, page, items) };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/characters/:characterId/documents/:documentId',
    auth: 'key',
    tags,
    summary: 'Retrieve a document and its processing status',
    params: DocumentParams,
    response: { status: 200, schema: DocumentSchema, description: 'The document' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.documents.get(principal.projectId, params.characterId, params.documentId),
    }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/characters/:characterId/documents/:documentId',
    auth: 'key',
    tags,
    summary: 'Delete a document; its chunks leave retrieval at once and processing stops',
    params: DocumentParams,
    response: { status: 200, schema: DeletedSchema, description: 'Deleted' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({
      body: await resources.documents.delete(principal.projectId, params.characterId, params.documentId),
    }),
  }),
  defineRoute({
    method: 'POST',
    path: '/characters/:characterId/documents/:documentId/reprocess',
    auth: 'key',
    tags,
    summary: 'Process a document again from its stored original',
    params: DocumentParams,
    response: { status: 200, schema: DocumentSchema, description: 'The document, pending processing' },
    errors: [404],
    handler: async ({ params, principal, resources }) => {
      const document = await resources.documents.reprocess(principal.projectId, params.characterId, params.documentId);
      resources.documentProcessor.wake();
      return { body: document };
    },
  }),
];
