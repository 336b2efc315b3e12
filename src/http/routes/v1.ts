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
    summary: 'Create a chat completion; streams server-sent events unless `stream` is false (or an OpenAI-format SDK leaves it out)',
    body: ChatCompletionRequestSchema,
    response: {
      status: 200,
      description:
        'A chat.completion object, or a text/event-stream of chat.completion.chunk objects ending with [DONE]. Without `stream`, the reply ' +
        'streams (the interface default) unless the caller is an OpenAI-format SDK (x-stainless-* headers, or an ai-sdk user agent) ' +
        'that does not accept text/event-stream: those get one JSON chat.completion, as they expect.',
    },
    errors: [404, 429, 502],
    handler: async ({ body, principal, resources, signal, requestId, headers }): Promise<RouteResult> => {
      if (!wantsStream(body.stream, headers)) {
        return { body: await resources.chat.complete(principal.projectId, body, signal) };
      }
      // Failures until the upstream's first chunk are ordinary HTTP errors (thrown here).
      const { pipe, cancel } = await resources.chat.stream(principal.projectId, body, signal);
      return {
        body: null,
        headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
        stream: async (sink) => {
          let complete = false;
          try {
            // False when the client left.
            complete = await pipe((text) => sink.write(text));
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

/**
 * The interface streams by default, while every OpenAI-format SDK leaves `stream` out of its
 * non-streaming calls and expects JSON. Both hold: an explicit `stream` decides; without it a
 * caller that asks for events, or shows no sign of being such an SDK, gets the default stream,
 * and the SDKs (recognised by what they send) get one JSON response.
 */
function wantsStream(stream: boolean | null | undefined, headers: Readonly<Record<string, string>>): boolean {
  if (stream === true || stream === false) return stream;
  if (/\btext\/event-stream\b/i.test(headers.accept ?? '')) return true;
  return !isOpenAiFormatSdk(headers);
}

/** openai-node (and LangChain, LlamaIndex, the Agents SDK on top of it) sends x-stainless-*; the AI SDK says so in its user agent. */
function isOpenAiFormatSdk(headers: Readonly<Record<string, string>>): boolean {
  if ('x-stainless-lang' in headers || 'x-stainless-package-version' in headers) return true;
  return /\bai-sdk[/-]/i.test(headers['user-agent'] ?? '');
}
