import { createHmac, timingSafeEqual } from 'node:crypto';
import { rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { selfSignedCert } from '../../../test/support/tls.js';

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

/** What a path answers: a status, 'hang' (never answers), or a status after a delay. */
export type Behaviour = number | 'hang' | { status: number; delayMs: number };

/**
 * A real HTTPS webhook receiver on 127.0.0.1 with a throwaway self-signed certificate (openssl CLI);
 * `caFile` is what the dispatcher must trust (WEBHOOK_CA_FILE).
 */
export async function startReceiver() {
  const tls = selfSignedCert('webhook-rx-');
  const received: Received[] = [];
  const behaviour = new Map<string, Behaviour | Behaviour[]>();
  // Requests being answered per path, and the most seen at once.
  const inflight = new Map<string, number>();
  const peak = new Map<string, number>();
  const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      received.push({ path, headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      let b = behaviour.get(path) ?? 200;
      if (Array.isArray(b)) b = b.length > 1 ? (b.shift() as Behaviour) : (b[0] ?? 200);
      if (b === 'hang') return;
      if (typeof b === 'object') {
        const { status, delayMs } = b;
        const n = (inflight.get(path) ?? 0) + 1;
        inflight.set(path, n);
        peak.set(path, Math.max(peak.get(path) ?? 0, n));
        setTimeout(() => {
          inflight.set(path, (inflight.get(path) ?? 1) - 1);
          res.writeHead(status, { 'content-type': 'text/plain' });
          res.end(status < 300 ? 'ok' : 'nope');
        }, delayMs);
        return;
      }
      res.writeHead(b, { 'content-type': 'text/plain', ...(b >= 300 && b < 400 ? { location: `${path}-moved` } : {}) });
      res.end(b < 300 ? 'ok' : 'nope');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    caFile: tls.certFile,
    url: (path: string) => `https://localhost:${port}${path}`,
    received,
    on: (path: string) => received.filter((r) => r.path === path),
    /** Most requests to `path` answered at the same time (delayed behaviours only). */
    peakConcurrency: (path: string) => peak.get(path) ?? 0,
    /** A status per request in order (the last one repeats), or one for all. */
    respond(path: string, b: Behaviour | Behaviour[]) {
      behaviour.set(path, Array.isArray(b) ? [...b] : b);
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(tls.dir, { recursive: true, force: true });
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** Verifies X-Webhook-Signature (hex HMAC of the body keyed with the secret string) and its timestamp. */
export function verifyLegacy(secret: string, r: Received, toleranceS = 300): boolean {
  const ts = Number(r.headers['x-webhook-timestamp']);
  if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > toleranceS) return false;
  const expected = `sha256=${createHmac('sha256', secret).update(r.body).digest('hex')}`;
  const got = r.headers['x-webhook-signature'] ?? '';
  return got.length === expected.length && timingSafeEqual(Buffer.from(got), Buffer.from(expected));
}

/** Verifies the Standard Webhooks headers the way the reference libraries do. */
export function verifyStandard(secret: string, r: Received, toleranceS = 300): boolean {
  const id = r.headers['webhook-id'];
  const ts = Number(r.headers['webhook-timestamp']);
  if (!id || !Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > toleranceS) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${r.body}`).digest('base64');
  return (r.headers['webhook-signature'] ?? '')
    .split(' ')
    .some(
      (s) =>
        s.startsWith('v1,') && s.slice(3).length === expected.length && timingSafeEqual(Buffer.from(s.slice(3)), Buffer.from(expected)),
    );
}

/**
 * Verifies a delivery as a receiver would with the `standardwebhooks` package (`new Webhook(secret).verify(body,
 * headers)`: the webhook-id, webhook-timestamp (5 minutes' tolerance) and webhook-signature headers) and answers
 * its parsed body, or throws. The package is not installed in this workspace; this is the same check written
 * against the Standard Webhooks specification (verifyStandard), the one place to swap the package in.
 */
export function verifyWebhook(secret: string, r: Received): Record<string, unknown> {
  if (!verifyStandard(secret, r)) throw new Error(`webhook verification failed (webhook-id ${r.headers['webhook-id']})`);
  return JSON.parse(r.body) as Record<string, unknown>;
}
