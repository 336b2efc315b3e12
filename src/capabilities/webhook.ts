import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

export interface WebhookDelivery {
  url: string;
  secret: string;
  body: Record<string, unknown>;
  timeoutMs: number;
  /** Loopback and private networks are refused unless the operator allows them. */
  allowPrivate: boolean;
  signal?: AbortSignal;
}

class WebhookError extends Error {
  override name = 'WebhookError';
}

const MAX_RESPONSE_BYTES = 1024 * 1024;

/** Addresses a webhook may not reach by default: loopback, private, link-local, unspecified… */
const PRIVATE = new BlockList();
for (const [net, bits] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['::ffff:0:0', 96]] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv6');
}

function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return PRIVATE.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * `x-troupe-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the project's
 * webhook secret>`. The timestamp lets receivers refuse replays.
 */
export function signWebhook(secret: string, body: string, timestamp: number): string {
  const mac = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${mac}`;
}

/**
 * POSTs the call as JSON, signed, with a timeout and no redirects, and resolves with the JSON the
 * receiver answered (undefined for an empty 2xx body). The address check runs at connect time,
 * on the address actually dialled, so DNS rebinding cannot slip a private address through.
 */
export function deliverWebhook(delivery: WebhookDelivery): Promise<unknown> {
  const url = new URL(delivery.url);
  const payload = JSON.stringify(delivery.body);
  const signature = signWebhook(delivery.secret, payload, Math.floor(Date.now() / 1000));
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          'user-agent': 'troupe-webhooks/1',
          'x-troupe-signature': signature,
        },
        lookup: guardedLookup(delivery.allowPrivate),
        timeout: delivery.timeoutMs,
        signal: delivery.signal,
      },
      (res) => void readReply(res).then(resolve, reject),
    );
    req.on('timeout', () => req.destroy(new WebhookError(`the webhook did not answer within ${delivery.timeoutMs} ms`)));
    req.on('error', (err) => reject(err instanceof WebhookError ? err : new WebhookError(`the webhook could not be reached: ${err.message}`)));
    // A literal IP skips `lookup`, so it is checked here.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && !delivery.allowPrivate && isPrivateAddress(host)) {
      req.destroy(new WebhookError(`the webhook address ${host} is private or loopback; set WEBHOOK_ALLOW_PRIVATE=true to allow it`));
      return;
    }
    req.end(payload);
  });
}

async function readReply(res: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_RESPONSE_BYTES) throw new WebhookError('the webhook answered more than 1 MiB');
    chunks.push(chunk);
  }
  const status = res.statusCode ?? 0;
  if (status >= 300 && status < 400) throw new WebhookError(`the webhook answered a redirect (${status}); redirects are not followed`);
  if (status < 200 || status >= 300) throw new WebhookError(`the webhook answered HTTP ${status}`);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new WebhookError('the webhook answered something that is not JSON');
  }
}

function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const list = Array.isArray(addresses) ? addresses : [];
      const blocked = list.find((a) => !allowPrivate && isPrivateAddress(a.address));
      if (blocked) {
        return callback(new WebhookError(`the webhook host ${hostname} resolves to the private or loopback address ${blocked.address}; set WEBHOOK_ALLOW_PRIVATE=true to allow it`), '', 0);
      }
      if (options.all) return callback(null, list as unknown as string, 0);
      const first = list[0];
      if (!first) return callback(new WebhookError(`the webhook host ${hostname} has no address`), '', 0);
      callback(null, first.address, first.family);
    });
  };
}
