import { z } from 'zod';
import { TroupeError } from '../../errors.ts';
import { defineRoute, type Route } from '../route.ts';

const tags = ['Operations'];

/** Liveness, readiness, metrics and the API description; none of them needs an API key. */
export function metaRoutes(openapi: () => unknown): Route[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/healthz',
      auth: 'none',
      tags,
      summary: 'Liveness: the process answers',
      response: { status: 200, schema: z.object({ status: z.literal('ok') }), description: 'Alive' },
      handler: async () => ({ body: { status: 'ok' } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/readyz',
      auth: 'none',
      tags,
      summary: 'Readiness: the database answers and the process is not shutting down',
      response: { status: 200, schema: z.object({ status: z.literal('ready'), database: z.string() }), description: 'Ready' },
      errors: [503],
      handler: async ({ resources }) => {
        if (resources.lifecycle.draining) throw new TroupeError('service_unavailable', 'The server is shutting down.');
        try {
          await resources.database.ping();
        } catch (err) {
          throw new TroupeError('service_unavailable', 'The database does not answer.', { cause: err });
        }
        return { body: { status: 'ready', database: resources.database.kind } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/metrics',
      auth: 'metrics',
      tags,
      summary: 'Prometheus metrics (open unless METRICS_PUBLIC=false, then the admin token is required)',
      response: { status: 200, description: 'Prometheus text format', contentType: 'text/plain' },
      handler: async ({ resources }) => ({ body: null, raw: await resources.metrics.render() }),
    }),
    defineRoute({
      method: 'GET',
      path: '/openapi.json',
      auth: 'none',
      tags,
      summary: 'This API as an OpenAPI 3.1 document',
      response: { status: 200, description: 'OpenAPI document' },
      handler: async () => ({ body: openapi() }),
    }),
  ];
}
