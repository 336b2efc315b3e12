import { z } from 'zod';
import type { Page } from '../projects/service.ts';

/**
 * List endpoints return a plain array (as the interface specifies) in creation order. Callers
 * page with `?limit=&after=<last id>`; when a page is full, a `Link: <…>; rel="next"` header
 * gives the next page's URL.
 */
export const PageQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  after: z.string().min(1).max(200).optional(),
});

export function toPage(query: z.infer<typeof PageQuerySchema>): Page {
  return { limit: query.limit, after: query.after };
}

export function nextLink(path: string, page: Page, items: readonly { id: string }[]): Record<string, string> {
  const last = items.at(-1);
  if (!last || items.length < page.limit) return {};
  const params = new URLSearchParams({ limit: String(page.limit), after: last.id });
  return { link: `<${path}?${params.toString()}>; rel="next"` };
}
