import { describe, expect, it } from 'vitest';
import { defineRoute, type Route } from '../../src/http/route.ts';
import { Router } from '../../src/http/router.ts';

const route = (method: 'GET' | 'POST' | 'DELETE', path: string): Route =>
  defineRoute({ method, path, auth: 'none', summary: '', tags: [], response: { status: 200, description: '' }, handler: async () => ({ body: null }) });

describe('Router', () => {
  const router = new Router();
  router.add(route('GET', '/characters'));
  router.add(route('POST', '/characters'));
  router.add(route('GET', '/characters/:characterId'));
  router.add(route('GET', '/characters/special'));
  router.add(route('DELETE', '/characters/:characterId/capabilities/:capabilityId'));

  it('matches literals before parameters and decodes parameters', () => {
    const special = router.match('GET', '/characters/special');
    expect(special.kind === 'found' && special.route.path).toBe('/characters/special');
    const byId = router.match('GET', '/characters/a%20b');
    expect(byId).toMatchObject({ kind: 'found', params: { characterId: 'a b' } });
    expect(router.match('DELETE', '/characters/c1/capabilities/k1')).toMatchObject({ params: { characterId: 'c1', capabilityId: 'k1' } });
  });

  it('tells not found from method not allowed', () => {
    expect(router.match('GET', '/nothing')).toEqual({ kind: 'not_found' });
    expect(router.match('GET', '/characters/c1/capabilities')).toEqual({ kind: 'not_found' });
    expect(router.match('PATCH', '/characters')).toEqual({ kind: 'method_not_allowed', allow: ['GET', 'POST'] });
    expect(router.match('GET', '/characters//')).toEqual({ kind: 'not_found' });
    expect(router.match('GET', '/characters/%E0%A4%A')).toEqual({ kind: 'not_found' });
  });

  it('serves HEAD with the GET route and ignores one trailing slash', () => {
    expect(router.match('HEAD', '/characters')).toMatchObject({ kind: 'found' });
    expect(router.match('GET', '/characters/')).toMatchObject({ kind: 'found' });
  });

  it('refuses duplicate routes and conflicting parameter names', () => {
    expect(() => router.add(route('GET', '/characters'))).toThrow(/duplicate/);
    expect(() => router.add(route('GET', '/characters/:id/x'))).toThrow(/conflicting/);
  });
});
