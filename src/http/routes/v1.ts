import { z } from 'zod';
import { toErrorBody } from '../../errors.ts';
import { ChatCompletionRequestSchema } from '../../inference/schemas.ts';
import { IdParam } from '../common-schemas.ts';
import { defineRoute, type RouteResult } from '../route.ts';

const tags = ['OpenAI-compatible'];

const ModelSchema = z
  .object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string() })
  .meta({ id: 'Model' });

/**
 * The OpenAI-compatible surface: point any OpenAI client at {base}/v1 with a Troupe key, and
 * use a character id (or an upstream model id) as `model`.
 */
export const v1Routes = [
  defineRoute({
    method: 'GET',
    path: '/v1/models',
    auth: 'key',
    tags,
    summary: "The upstream's models and every character of the project",
    response: { status: 200, schema: z.object({ object: z.literal('list'), data: z.array(ModelSchema) }), description: 'Model list' },
    errors: [502],
    handler: async ({ principal, resources }) => ({
      body: { object: 'list', data: await resources.chat.listModels(principal.projectId) },
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/models/:model',
    auth: 'key',
    tags,
    summary: 'Retrieve a model (a character id works)',
    params: z.strictObject({ model: IdParam }),
    response: { status: 200, schema: ModelSchema, description: 'The model' },
    errors: [404, 502],
    handler: async ({ params, principal, resources }) => ({ body: await resources.chat.getModel(principal.projectId, params.model) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/v1/chat/completions',
    auth: 'key',
    tags,
    summary: 'Create a chat completion; streams server-sent events unless `stream` is false',
    body: ChatCompletionRequestSchema,
    response: { status: 200, description: 'A chat.completion object, or a text/event-stream of chat.completion.chunk objects ending with [DONE]' },
    errors: [404, 429, 502],
    handler: async ({ body, principal, resources, signal, requestId }): Promise<RouteResult> => {
      if (body.stream === false) {
        return { body: await resources.chat.complete(principal.projectId, body, signal) };
      }
      // Failures until the upstream's first chunk are ordinary HTTP errors (thrown here).
      const { chunks, cancel } = await resources.chat.stream(principal.projectId, body, signal);
      return {
        body: null,
        headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
        stream: async (sink) => {
          let complete = false;
          try {
            for await (const chunk of chunks) {
              if (!(await sink.write(`data: ${JSON.stringify(chunk)}\n\n`))) return; // client gone
            }
            complete = true;
            await sink.write('data: [DONE]\n\n');
          } catch (err) {
            // After the first byte the status is sent: report the failure as an error event.
            if (signal.aborted) return;
            resources.logger.warn({ err, requestId }, 'chat completion stream failed');
            await sink.write(`data: ${JSON.stringify(toErrorBody(err, requestId).body)}\n\n`);
          } finally {
            if (!complete) cancel();
          }
        },
      };
    },
  }),
];
