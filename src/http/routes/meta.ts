import { z } from 'zod';
import { TroupeError } from '../../errors.ts';
import { voiceProblems } from '../../voice/readiness.ts';
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
      summary: 'Readiness within 1 s: the database (and Redis, when configured) answer and the process is not shutting down',
      response: {
        status: 200,
        schema: z.object({
          status: z.literal('ready'),
          database: z.string(),
          redis: z.boolean(),
          // With LiveKit configured: whether voice agents can serve rooms, and what stops them (they do not make the API unready).
          voice: z.object({ ready: z.boolean(), problems: z.array(z.string()) }).optional(),
        }),
        description: 'Ready',
      },
      errors: [503],
      handler: async ({ resources }) => {
        if (resources.lifecycle.draining) throw new TroupeError('service_unavailable', 'The server is shutting down.', { detailCode: 'draining' });
        const redis = resources.config.redisUrl !== undefined;
        const [database, presence] = await Promise.all([
          answersWithin(resources.database.ping(), READY_DEADLINE_MS),
          redis ? answersWithin(resources.conversationActors.ping(), READY_DEADLINE_MS) : Promise.resolve(true),
        ]);
        if (!database) {
          throw new TroupeError('database_unavailable', `The database does not answer within ${READY_DEADLINE_MS} ms.`, { headers: { 'retry-after': '2' } });
        }
        if (!presence) {
          throw new TroupeError('redis_unavailable', `Redis (REDIS_URL) does not answer within ${READY_DEADLINE_MS} ms.`, { headers: { 'retry-after': '2' } });
        }
        const body = { status: 'ready', database: resources.database.kind, redis };
        if (!resources.config.livekit.url) return { body };
        const problems = voiceProblems(resources.config);
        return { body: { ...body, voice: { ready: problems.length === 0, problems } } };
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

/** Load balancers poll readiness with short timeouts of their own: answer before them. */
const READY_DEADLINE_MS = 1_000;

/** True when `check` succeeds within `ms`; false when it fails or is still pending then. */
function answersWithin(check: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const answered = check.then(
    () => true,
    () => false,
  );
  return Promise.race([answered, late]).finally(() => clearTimeout(timer));
}
