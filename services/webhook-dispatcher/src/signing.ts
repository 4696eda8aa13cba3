import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Webhook secrets are `whsec_<base64 of 32 random bytes>` (the Standard Webhooks format), so one secret
 * serves both signature schemes:
 *  - X-Webhook-Signature: sha256=<hex HMAC-SHA256 of the raw body>, keyed with the whole secret string
 *    as shown at creation (UTF-8, including the `whsec_` prefix);
 *  - webhook-signature: v1,<base64 HMAC-SHA256 of `${webhook-id}.${webhook-timestamp}.${body}`>, keyed
 *    with the base64-decoded part after `whsec_` (what Standard Webhooks libraries do with the secret).
 */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function secretHint(secret: string): string {
  return `${secret.slice(0, 10)}...`;
}

export function legacySignature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * Every header of one attempt; the timestamp is the attempt's (unix seconds). `webhookId` is the event's id: the
 * same on every attempt, endpoint and replay of the event (Standard Webhooks' message id, what receivers dedupe on).
 */
export function signedHeaders(secret: string, webhookId: string, body: string, now = Date.now()): Record<string, string> {
  const ts = Math.floor(now / 1000);
  return {
    'content-type': 'application/json',
    'user-agent': 'imagegen-webhooks/1.0',
    'x-webhook-signature': legacySignature(secret, body),
    'x-webhook-timestamp': String(ts),
    'webhook-id': webhookId,
    'webhook-timestamp': String(ts),
    'webhook-signature': standardSignature(secret, webhookId, ts, body),
  };
}

/** Secrets at rest: AES-256-GCM under a key derived from CREDENTIALS_KEY (plain when none is set). */
export class SecretBox {
  private readonly key?: Buffer;
  constructor(credentialsKey?: string) {
    if (credentialsKey) {
      this.key = Buffer.from(hkdfSync('sha256', Buffer.from(credentialsKey, 'base64'), Buffer.alloc(0), 'imagegen webhook secrets', 32));
    }
  }

  seal(secret: string): string {
    if (!this.key) return `plain:${secret}`;
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const ct = Buffer.concat([c.update(secret, 'utf8'), c.final()]);
    return `enc:v1:${iv.toString('base64')}:${c.getAuthTag().toString('base64')}:${ct.toString('base64')}`;
  }

  open(stored: string): string {
    if (stored.startsWith('plain:')) return stored.slice(6);
    const [, , iv, tag, ct] = stored.split(':');
    if (!this.key || !iv || !tag || !ct) throw new Error('webhook secret cannot be decrypted (CREDENTIALS_KEY missing or changed)');
    const d = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    d.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([d.update(Buffer.from(ct, 'base64')), d.final()]).toString('utf8');
  }
}
