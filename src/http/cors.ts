/** CORS headers for `origin` under the configured policy; none when it is not allowed. */
export function corsHeaders(allowed: '*' | readonly string[], origin: string | undefined): Record<string, string> {
  if (!origin) return {};
  if (allowed === '*') {
    return { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED };
  }
  if (!allowed.includes(origin)) return {};
  return { 'access-control-allow-origin': origin, vary: 'origin', 'access-control-expose-headers': EXPOSED };
}

export function preflightHeaders(methods: readonly string[]): Record<string, string> {
  return {
    'access-control-allow-methods': [...methods, 'OPTIONS'].join(', '),
    'access-control-allow-headers': 'authorization, content-type, x-request-id',
    'access-control-max-age': '600',
  };
}

const EXPOSED = 'x-request-id, link, retry-after';
