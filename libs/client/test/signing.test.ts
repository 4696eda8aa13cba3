import { createHmac } from 'node:crypto';
import { expect, test } from 'vitest';
import { imagegenClient, signedBytes, signRequest } from '../src/index.js';

/** The typed client's request signing (README, "Signed requests"): the documented string, signed as sent. */

const SECRET = 'sigsec_c2lnbmluZy1zZWNyZXQtZm9yLXRoZS10ZXN0cy0xMjM0NQ';
const reference = (timestamp: string, method: string, pathWithQuery: string, body: Buffer | string = '') =>
  createHmac('sha256', SECRET).update(`${timestamp}\n${method}\n${pathWithQuery}\n`).update(body).digest('hex');

test('signRequest is the hex HMAC-SHA256 of "<timestamp>\\n<METHOD>\\n<path?query>\\n<raw body>"', async () => {
  const body = '{"name":"Café ☕"}';
  expect(new TextDecoder().decode(signedBytes({ timestamp: '1700000000000', method: 'post', pathWithQuery: '/api/x?a=1', body }))).toBe(
    `1700000000000\nPOST\n/api/x?a=1\n${body}`,
  );
  expect(await signRequest(SECRET, { timestamp: '1700000000000', method: 'POST', pathWithQuery: '/api/style-presets', body })).toBe(
    reference('1700000000000', 'POST', '/api/style-presets', Buffer.from(body, 'utf8')),
  );
  expect(await signRequest(SECRET, { timestamp: '1', method: 'GET', pathWithQuery: '/api/images?limit=5' })).toBe(
    reference('1', 'GET', '/api/images?limit=5'),
  );
});

test('a client given signingSecret signs every request as it is sent (after the other middleware)', async () => {
  const sent: { url: URL; method: string; headers: Headers; body: Buffer }[] = [];
  const client = imagegenClient({
    baseUrl: 'http://gateway.test',
    apiKey: 'sk_live_x',
    signingSecret: SECRET,
    // Runs before the signing: what it changes is signed.
    middleware: [{ onRequest: ({ request }) => new Request(`${request.url.replace('limit=3', 'limit=4')}`, request) }],
    fetch: async (request: Request) => {
      sent.push({
        url: new URL(request.url),
        method: request.method,
        headers: request.headers,
        body: Buffer.from(await request.arrayBuffer()),
      });
      return new Response('{"data":[]}', { status: 200, headers: { 'content-type': 'application/json' } });
    },
  });
  await client.GET('/api/images', { params: { query: { limit: 3, search: 'fox & hound' } } });
  await client.POST('/api/style-presets', { body: { name: 'Ünïcode', prompt: 'ink,' } });
  expect(sent).toHaveLength(2);
  for (const r of sent) {
    const timestamp = r.headers.get('x-timestamp') as string;
    expect(Math.abs(Number(timestamp) - Date.now())).toBeLessThan(60_000);
    expect(r.headers.get('x-api-key')).toBe('sk_live_x');
    expect(r.headers.get('x-signature')).toBe(reference(timestamp, r.method, r.url.pathname + r.url.search, r.body));
  }
  expect(sent[0].url.search).toContain('limit=4');
  expect(sent[1].body.toString('utf8')).toBe('{"name":"Ünïcode","prompt":"ink,"}');
});

test('a client without signingSecret sends no signature headers', async () => {
  let headers: Headers | undefined;
  const client = imagegenClient({
    baseUrl: 'http://gateway.test',
    apiKey: 'sk_live_x',
    fetch: async (request: Request) => {
      headers = request.headers;
      return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
    },
  });
  await client.GET('/api/images', {});
  expect(headers?.get('x-signature')).toBeNull();
  expect(headers?.get('x-timestamp')).toBeNull();
});
