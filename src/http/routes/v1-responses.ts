import { z } from 'zod';
import { ResponseCreateRequestSchema } from '../../inference/responses/schemas.ts';
import type { ResponseEvent } from '../../inference/responses/stream.ts';
import { IdParam } from '../common-schemas.ts';
import { defineRoute, type RouteResult } from '../route.ts';

const tags = ['OpenAI-compatible'];

const ResponseIdParams = z.strictObject({ responseId: IdParam });

/** What openai-node's retrieve may send; stored responses are returned whole, so only `stream` matters. */
const RetrieveQuery = z.strictObject({
  include: z.string().optional(),
  'include[]': z.string().optional(),
  include_obfuscation: z.string().optional(),
  starting_after: z.string().optional(),
  stream: z.enum(['true', 'false']).refine((value) => value !== 'true', 'streaming a stored response again is not supported').optional(),
});

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };

function frame(event: ResponseEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * OpenAI's Responses API over the same characters and upstream as /v1/chat/completions. Unlike
 * chat completions, the Responses API's `stream` defaults to false: without it the reply is JSON.
 */
export const v1ResponseRoutes = [
  defineRoute({
    method: 'POST',
    path: '/v1/responses',
    auth: 'key',
    tags,
    summary: 'Create a model response (OpenAI Responses API); a character id works as `model`',
    body: ResponseCreateRequestSchema,
    response: {
      status: 200,
      description:
        'A response object, or with `stream: true` a text/event-stream of Responses events (`event: <type>` and `data: <json>`, ' +
        'numbered by sequence_number) from response.created to response.completed; a failure after the first byte ends it with ' +
        'an `error` event and response.failed. A character\'s document citations come as an extra `citations` field.',
    },
    errors: [404, 429, 502],
    handler: async ({ body, principal, resources, signal, requestId }): Promise<RouteResult> => {
      if (body.stream !== true) return { body: await resources.responses.create(principal.projectId, body, signal) };
      // Failures until the upstream's first chunk are ordinary HTTP errors (thrown here).
      const { events, cancel } = await resources.responses.stream(principal.projectId, body, signal, (err) =>
        resources.logger.warn({ err, requestId }, 'response stream failed'),
      );
      return {
        body: null,
        headers: SSE_HEADERS,
        stream: async (sink) => {
          let complete = false;
          try {
            for await (const event of events) {
              if (!(await sink.write(frame(event)))) return; // client gone
            }
            complete = true;
          } catch (err) {
            // The events end themselves on upstream failures; this is only for the unexpected.
            if (!signal.aborted) resources.logger.error({ err, requestId }, 'response stream broke');
          } finally {
            if (!complete) cancel();
          }
        },
      };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/responses/:responseId',
    auth: 'key',
    tags,
    summary: 'Retrieve a stored response (not those created with `store: false`)',
    params: ResponseIdParams,
    query: RetrieveQuery,
    response: { status: 200, description: 'The response object as it was returned' },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({ body: await resources.responses.get(principal.projectId, params.responseId) }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v1/responses/:responseId',
    auth: 'key',
    tags,
    summary: 'Delete a stored response',
    params: ResponseIdParams,
    response: {
      status: 200,
      schema: z.object({ id: z.string(), object: z.literal('response.deleted'), deleted: z.literal(true) }).meta({ id: 'ResponseDeleted' }),
      description: 'Deleted',
    },
    errors: [404],
    handler: async ({ params, principal, resources }) => ({ body: await resources.responses.delete(principal.projectId, params.responseId) }),
  }),
];
