import { IdempotencyKey } from '../conversations/protocol.ts';
import { TroupeError } from '../errors.ts';

/** The optional `Idempotency-Key` header (Stripe's name): a retried send is stored and answered once. */
export function idempotencyKeyOf(headers: Readonly<Record<string, string>>): string | undefined {
  const raw = headers['idempotency-key'];
  if (raw === undefined) return undefined;
  const parsed = IdempotencyKey.safeParse(raw);
  if (!parsed.success) {
    throw new TroupeError('invalid_request', 'Invalid header Idempotency-Key: must be 1 to 255 visible ASCII characters.', {
      param: 'Idempotency-Key',
      detailCode: 'invalid_parameter',
    });
  }
  return parsed.data;
}
