import { WebhookReceiver } from 'livekit-server-sdk';
import type { LiveKitConfig } from '../config.ts';
import { TroupeError } from '../errors.ts';
import { missingVariables, notConfigured } from './credentials.ts';
import { toParticipant, type LiveKitParticipant } from './shapes.ts';

/** A verified LiveKit webhook, as plain data. */
export interface LiveKitWebhookEvent {
  id: string;
  /** `room_started`, `room_finished`, `participant_joined`, `participant_left`, `track_published`, ... */
  event: string;
  /** When LiveKit emitted it, in unix seconds. */
  createdAtS: number;
  room: { sid: string; name: string; metadata: string } | null;
  participant: LiveKitParticipant | null;
}

export interface LiveKitWebhooksOptions {
  config: LiveKitConfig;
}

/**
 * Verifies the webhooks LiveKit posts (a JWT signed with the API secret in `Authorization`
 * whose `sha256` claim is the body's digest). Needs only LIVEKIT_API_KEY and LIVEKIT_API_SECRET.
 */
export class LiveKitWebhooks {
  readonly #config: LiveKitConfig;
  readonly #receiver: WebhookReceiver | null;

  constructor(options: LiveKitWebhooksOptions) {
    this.#config = options.config;
    const { apiKey, apiSecret } = options.config;
    this.#receiver = apiKey && apiSecret ? new WebhookReceiver(apiKey, apiSecret) : null;
  }

  /**
   * The event in `body` (the raw request body, exactly as received) once `authorization` proves
   * LiveKit sent it: 401 `invalid_webhook_signature` otherwise, 400 for a signed body that is
   * not a webhook event.
   */
  async receive(body: string, authorization: string | undefined): Promise<LiveKitWebhookEvent> {
    if (!this.#receiver) throw notConfigured(missingVariables(this.#config, ['apiKey', 'apiSecret']));
    // LiveKit sends the bare token; a proxy or test client may have added the usual scheme.
    const token = authorization?.replace(/^Bearer\s+/i, '').trim();
    if (!token) throw new TroupeError('invalid_webhook_signature', 'The LiveKit webhook has no Authorization header.');
    let received;
    try {
      received = await this.#receiver.receive(body, token);
    } catch (err) {
      // The SDK checks the signature before it parses: only a parse failure can mean a signed bad body.
      if (isBodyError(err)) {
        throw new TroupeError('invalid_request', 'The LiveKit webhook body is not a webhook event.', { cause: err, detailCode: 'invalid_webhook_body' });
      }
      throw new TroupeError('invalid_webhook_signature', 'The LiveKit webhook signature does not verify (wrong key or secret, expired, or the body was changed).', {
        cause: err,
      });
    }
    if (!received.event) {
      throw new TroupeError('invalid_request', 'The LiveKit webhook names no event.', { detailCode: 'invalid_webhook_body' });
    }
    return {
      id: received.id,
      event: received.event,
      createdAtS: Number(received.createdAt),
      room: received.room ? { sid: received.room.sid, name: received.room.name, metadata: received.room.metadata } : null,
      participant: received.participant ? toParticipant(received.participant) : null,
    };
  }
}

/** JSON.parse's SyntaxError, or protobuf-es refusing the JSON ("cannot decode message ..."). */
function isBodyError(err: unknown): boolean {
  return err instanceof SyntaxError || (err instanceof Error && /^cannot (decode|parse)/i.test(err.message));
}
