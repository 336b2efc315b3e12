import { z } from 'zod';

export const IdParam = z.string().min(1).max(200);

export const DeletedSchema = z.object({ id: z.string(), deleted: z.literal(true) }).meta({ id: 'Deleted' });

export const ErrorSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string().describe('invalid_request_error, authentication_error or api_error'),
      param: z.string().nullable().describe('The request field the error is about, if any'),
      code: z.string().describe('Machine-readable code, e.g. character_not_found'),
    }),
  })
  .meta({ id: 'Error' });
