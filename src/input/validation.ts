import type { z } from 'zod';
import { TroupeError } from '../errors.ts';
import { formatParam } from './text.ts';

/** One options object for every parse: hot routes parse on every request. */
const PARSE_OPTIONS = Object.freeze({ reportInput: true });

/** Parses `value` with `schema`, turning the first problem into a 400 that names the field. */
export function parseInput<T extends z.ZodType>(schema: T, value: unknown, root: string | null): z.infer<T> {
  const result = schema.safeParse(value, PARSE_OPTIONS);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue) throw new TroupeError('invalid_request', 'The request is invalid.');
  const path = [...(root ? [root] : []), ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    const param = formatParam([...path, key]);
    throw new TroupeError('unknown_parameter', `Unrecognized request parameter: '${param}'.`, { param, detailCode: 'unknown_parameter' });
  }
  const param = formatParam(path);
  if ((issue.code === 'invalid_type' || issue.code === 'invalid_value') && issue.input === undefined) {
    throw new TroupeError('invalid_request', `Missing required parameter: '${param}'.`, { param, detailCode: 'missing_parameter' });
  }
  const message = param ? `Invalid '${param}': ${issue.message}.` : `Invalid request: ${issue.message}.`;
  throw new TroupeError('invalid_request', message, { param: param || null, detailCode: 'invalid_parameter' });
}
