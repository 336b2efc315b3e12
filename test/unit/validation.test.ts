import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TroupeError, toErrorBody } from '../../src/errors.ts';
import { formatParam } from '../../src/input/text.ts';
import { parseInput } from '../../src/input/validation.ts';

describe('request validation', () => {
  it('formats paths the way OpenAI error params read', () => {
    expect(formatParam(['parameters', 0, 'name'])).toBe('parameters[0].name');
    expect(formatParam([])).toBe('');
  });

  it('maps zod problems to TroupeErrors naming the field', () => {
    const schema = z.strictObject({ name: z.string(), n: z.number().optional() });
    const missing = (() => { try { parseInput(schema, {}, null); } catch (e) { return e; } })() as TroupeError;
    expect(missing).toBeInstanceOf(TroupeError);
    expect(toErrorBody(missing, 'req_1')).toEqual({
      status: 400,
      headers: {},
      body: { error: { message: "Missing required parameter: 'name'.", type: 'invalid_request_error', param: 'name', code: 'missing_parameter' } },
    });
    expect(() => parseInput(schema, { name: 'x', extra: 1 }, null)).toThrow("Unrecognized request parameter: 'extra'.");
    expect(() => parseInput(schema, { name: 'x', n: 'one' }, null)).toThrow(/Invalid 'n'/);
  });

  it('never exposes internal errors', () => {
    const mapped = toErrorBody(new Error('connection refused at 10.0.0.5'), 'req_abc');
    expect(mapped.status).toBe(500);
    expect(mapped.body.error.message).toContain('req_abc');
    expect(mapped.body.error.message).not.toContain('10.0.0.5');
    expect(mapped.body.error.type).toBe('api_error');
  });
});
