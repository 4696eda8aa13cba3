/**
 * Issue 15, items 3-5 from outside, through the gateway: one image guard for product and scene URL imports
 * (a PNG that declares 16000 x 16000 pixels is refused from its header, like the upload route refuses it),
 * fetch budgets that end in the spec's 400 (a drip-fed body, not the gateway's 504 after the 30 s call
 * deadline), and one tenant that cannot degrade another (NUL prompts refused before they are sent; circuit
 * breakers per credential, so tenant A's upstream faults never answer tenant B with 503).
 */
import { createServer, type Server } from 'node:http';
import { crc32, deflateSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { lastSandboxId, receivedSince, sandboxMode } from './generation-support.js';
import { type ImageServer, startImageServer } from './products-support.js';

let s: TestStack;
let img: ImageServer;
let drip: { url: string; close(): Promise<void> };

/** A valid 1-bit greyscale PNG of width x height (all black): tiny on the wire, huge once decoded. */
function bombPng(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // greyscale
  const raw = Buffer.alloc((1 + Math.ceil(width / 8)) * height); // filter byte 0 + zero bits per row
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A server that answers 200 image/png at once and then sends one byte per second, forever. */
async function startDripServer() {
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png' });
    res.write(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    const t = setInterval(() => res.write(Buffer.from([0])), 1000);
    timers.add(t);
    res.on('close', () => {
      clearInterval(t);
      timers.delete(t);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: async () => {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

beforeAll(async () => {
  s = await startTestStack({ env: { PROVIDER_BREAKER_THRESHOLD: '3', PROVIDER_BREAKER_RESET_MS: '30000', RATE_LIMIT_DISABLED: '1' } });
  img = await startImageServer();
  img.set('/bomb.png', bombPng(16000, 16000), 'image/png');
  drip = await startDripServer();
}, 60_000);
afterAll(async () => {
  await drip?.close();
  await img?.close();
  await s?.stop();
});
beforeEach(async () => {
  await fetch(`${s.sandboxUrl}/_sandbox/mode`, { method: 'DELETE' });
});

const TOO_MANY_PIXELS = 'Image has too many pixels: 16000 x 16000 = 256,000,000; the maximum is 4,194,304';

describe('one image guard for URL imports', () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await s.createTenant();
  });

  it('refuses a 16000 x 16000 PNG as a product URL, from its header, with the upload route’s text', async () => {
    expect(img.hits['/bomb.png'] ?? 0).toBe(0);
    const r = await s.api('/api/products', { key: t.liveKey, body: { product_name: 'bomb', product_url: `${img.url}/bomb.png` } });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toEqual({ error: TOO_MANY_PIXELS });
    expect((await s.api('/api/products', { key: t.liveKey })).body.data).toHaveLength(0);
  });

  it('refuses it as a scene reference_image_urls entry, and stores nothing', async () => {
    const r = await s.api('/api/scenes', {
      key: t.liveKey,
      body: { scene_name: 'bomb scene', reference_image_urls: [`${img.url}/red.png`, `${img.url}/bomb.png`] },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body).toEqual({ error: TOO_MANY_PIXELS });
    expect((await s.api('/api/scenes', { key: t.liveKey })).body.pagination.total).toBe(0);
  });

  it('the upload route refuses the same file with the same text', async () => {
    const r = await s.api('/api/upload-for-editing', { key: t.liveKey, body: { image_url: `${img.url}/bomb.png` } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe(TOO_MANY_PIXELS);
  });
});

describe('fetch budgets', () => {
  it('a drip-fed product or scene URL ends in 400 Failed to fetch image from URL, before the 30 s call deadline', async () => {
    const t = await s.createTenant();
    const started = Date.now();
    const [product, scene] = await Promise.all([
      s.api('/api/products', { key: t.liveKey, body: { product_name: 'slow', product_url: `${drip.url}/slow.png` } }),
      s.api('/api/scenes', { key: t.liveKey, body: { scene_name: 'slow', reference_image_urls: [`${drip.url}/slow.png`] } }),
    ]);
    const took = Date.now() - started;
    expect(product.status, JSON.stringify(product.body)).toBe(400);
    expect(product.body.error).toMatch(/^Failed to fetch image from URL: /);
    expect(scene.status, JSON.stringify(scene.body)).toBe(400);
    expect(scene.body.error).toMatch(/^Failed to fetch image from URL: /);
    expect(took).toBeLessThan(25_000);
  }, 60_000);
});

describe('one tenant cannot degrade another', () => {
  const gen = (t: TestTenant, prompt: string, model = 'provA-flash-lite-image') =>
    s.api('/api/images', { key: t.liveKey, body: { prompt, model_id: model } });

  it('5 prompts with a NUL character are refused with 400 before anything is sent; another tenant generates fine', async () => {
    const a = await s.createTenant();
    const b = await s.createTenant();
    const since = await lastSandboxId(s);
    for (let i = 0; i < 5; i++) {
      const r = await gen(a, `a red fox\u0000 number ${i}`);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(/prompt/);
    }
    // a lone surrogate and another C0 control character are refused too (provB as well)
    expect((await gen(a, 'broken \ud800 text', 'provB-image-2')).status).toBe(400);
    expect((await gen(a, 'bell \u0007 text')).status).toBe(400);
    expect(await receivedSince(s, since)).toHaveLength(0);
    // tab, line feed and carriage return are fine
    expect((await gen(a, 'line one\nline two\r\n\tindented')).status).toBe(200);
    const other = await gen(b, 'a calm lake at dawn');
    expect(other.status, JSON.stringify(other.body)).toBe(200);
  });

  it('the sandbox upstream answers a NUL prompt with 400, as a real provider does (not 500)', async () => {
    const provA = await fetch(`${s.sandboxUrl}/provA/v1beta/models/sandbox-model:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': 'sandbox-key-a1' },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'nul \u0000 here' }] }] }),
    });
    expect(provA.status).toBe(400);
    const provB = await fetch(`${s.sandboxUrl}/provB/v1/images/generations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sandbox-key-b1' },
      body: JSON.stringify({ model: 'm', prompt: 'nul \u0000 here' }),
    });
    expect(provB.status).toBe(400);
  });

  it('upstream faults open only the failing tenant’s circuit (per credential); other tenants keep generating', async () => {
    const a = await s.createTenant();
    const b = await s.createTenant();
    await sandboxMode(s, { provider: 'provA', failNext: 3, status: 500 });
    for (let i = 0; i < 3; i++) expect((await gen(a, `fault ${i}`)).status).toBe(502);
    const open = await gen(a, 'while open');
    expect(open.status).toBe(503);
    expect(open.body.code).toBe('PROVIDER_UNAVAILABLE');
    // the same key string configured by another tenant is another credential
    const other = await gen(b, 'unaffected');
    expect(other.status, JSON.stringify(other.body)).toBe(200);
  });

  it('refusals caused by the request (4xx, safety) never open a circuit', async () => {
    const a = await s.createTenant();
    for (let i = 0; i < 5; i++) expect((await gen(a, `unsafe ${i} [[safety]]`)).status).toBe(400);
    for (let i = 0; i < 5; i++) expect((await gen(a, `refused ${i} [[fail:400]]`)).status).toBe(400);
    expect((await gen(a, 'still closed')).status).toBe(200);
  });
});
