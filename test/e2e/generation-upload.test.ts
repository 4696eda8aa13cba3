/**
 * POST /api/upload-for-editing through the gateway: server-side fetch of an image URL (a local server;
 * the test stack runs with ALLOW_LOOPBACK_FETCH=1, which allows loopback only), each refusal a clear
 * 400 (private / link-local / metadata addresses, also after a redirect; too large; too many pixels;
 * animated GIF; not an image; upstream 404), the flat response, editing the upload, tenant isolation.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';
import { sharp } from './generation-support.js';

let s: TestStack;
let t: TestTenant;
let other: TestTenant;
let server: Server;
let base: string;
const routes = new Map<string, { status: number; type: string; body: Buffer; headers?: Record<string, string> }>();

const solid = (w: number, h: number, format: 'png' | 'jpeg' | 'webp' | 'gif' = 'png') =>
  sharp({ create: { width: w, height: h, channels: 3, background: '#4488cc' } })
    [format]()
    .toBuffer() as Promise<Buffer>;

beforeAll(async () => {
  const [stack] = await Promise.all([
    startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } }),
    (async () => {
      routes.set('/photo.png', { status: 200, type: 'image/png', body: await solid(640, 480) });
      routes.set('/photo.jpg', { status: 200, type: 'image/jpeg', body: await solid(300, 200, 'jpeg') });
      routes.set('/photo.webp', { status: 200, type: 'image/webp', body: await solid(200, 300, 'webp') });
      routes.set('/still.gif', { status: 200, type: 'image/gif', body: await solid(50, 50, 'gif') });
      routes.set('/exact.png', { status: 200, type: 'image/png', body: await solid(2048, 2048) }); // 4,194,304 px
      routes.set('/huge-pixels.png', { status: 200, type: 'image/png', body: await solid(2049, 2048) });
      const frames = [
        await solid(40, 40),
        await sharp({ create: { width: 40, height: 40, channels: 3, background: '#f00' } })
          .png()
          .toBuffer(),
      ];
      routes.set('/animated.gif', {
        status: 200,
        type: 'image/gif',
        body: await sharp(frames, { join: { animated: true } })
          .gif()
          .toBuffer(),
      });
      routes.set('/page.html', { status: 200, type: 'text/html', body: Buffer.from('<html><body>not an image</body></html>') });
      routes.set('/fake.png', { status: 200, type: 'image/png', body: Buffer.from('this is not a png at all') });
      routes.set('/too-big.png', { status: 200, type: 'image/png', body: randomBytes(20 * 1024 * 1024 + 1) });
      routes.set('/to-metadata', {
        status: 302,
        type: 'text/plain',
        body: Buffer.from(''),
        headers: { location: 'http://169.254.169.254/latest/meta-data/' },
      });
      routes.set('/to-private', { status: 302, type: 'text/plain', body: Buffer.from(''), headers: { location: 'http://10.1.2.3/x.png' } });
      routes.set('/to-photo', { status: 302, type: 'text/plain', body: Buffer.from(''), headers: { location: '/photo.png' } });
      server = createServer((req, res) => {
        const r = routes.get((req.url ?? '/').split('?')[0]);
        if (!r) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('missing');
        res.writeHead(r.status, { 'content-type': r.type, 'content-length': r.body.length, ...(r.headers ?? {}) }).end(r.body);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    })(),
  ]);
  s = stack;
  [t, other] = await Promise.all([s.createTenant(), s.createTenant()]);
});
afterAll(async () => {
  await s?.stop();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
});

const upload = (body: unknown, key = t.liveKey) => s.api('/api/upload-for-editing', { key, body });
const refused = async (body: unknown) => {
  const r = await upload(body);
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  return r.body;
};

describe('POST /api/upload-for-editing', () => {
  it('fetches a PNG and answers the flat shape; the image is in the library with operation upload', async () => {
    const r = await upload({ image_url: `${base}/photo.png`, file_name: 'holiday.png', mime_type: 'image/png' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({
      image_id: expect.any(Number),
      object_key: expect.stringMatching(new RegExp(`^tenants/${t.tenantId}/`)),
      public_url: expect.stringMatching(/^http/),
      size_bytes: routes.get('/photo.png')?.body.length,
      mime_type: 'image/png',
      message: expect.stringMatching(/uploaded/i),
    });
    const img = await s.api(`/api/images/${r.body.image_id}`, { key: t.liveKey });
    expect(img.body.data).toMatchObject({ operation: 'upload', width: 640, height: 480, aspectRatio: '4:3' });
    expect((await fetch(r.body.public_url)).status).toBe(200);
    // another tenant cannot see or edit it
    expect((await s.api(`/api/images/${r.body.image_id}`, { key: other.liveKey })).status).toBe(404);
    const steal = await s.api('/api/edit-image', { key: other.liveKey, body: { image_id: r.body.image_id, prompt: 'mine now' } });
    expect(steal.status).toBe(404);
    // the owner can edit it: the source shape is kept
    const edit = await s.api('/api/edit-image', { key: t.liveKey, body: { image_id: r.body.image_id, prompt: 'add snow' } });
    expect(edit.status, JSON.stringify(edit.body)).toBe(200);
    expect(edit.body).toMatchObject({ parentImageId: r.body.image_id, width: 1200, height: 896 });
    // the upload is an execution of the session
    const logs = await s.api(`/api/sessions/${encodeURIComponent(r.body.session_id)}/logs`, { key: t.liveKey });
    expect(logs.body.executions.map((e: any) => [e.toolName, e.status])).toEqual([['upload_for_editing', 'completed']]);
  });

  it('accepts JPEG, WebP, single-frame GIF, redirects to public hosts and exactly 4,194,304 pixels', async () => {
    for (const [path, mime] of [
      ['/photo.jpg', 'image/jpeg'],
      ['/photo.webp', 'image/webp'],
      ['/still.gif', 'image/gif'],
      ['/to-photo', 'image/png'],
      ['/exact.png', 'image/png'],
    ]) {
      const r = await upload({ image_url: `${base}${path}` });
      expect(r.status, `${path} ${JSON.stringify(r.body)}`).toBe(200);
      expect(r.body.mime_type).toBe(mime);
    }
  });

  it('names the image after the URL path, also when the path has malformed percent-escapes', async () => {
    routes.set('/caf%E9-100%.png', { status: 200, type: 'image/png', body: await solid(64, 64) });
    routes.set('/caf%C3%A9.png', { status: 200, type: 'image/png', body: await solid(64, 64) });
    for (const [path, name] of [
      ['/caf%E9-100%.png', 'caf%E9-100%.png'],
      ['/caf%C3%A9.png', 'café.png'],
    ]) {
      const r = await upload({ image_url: `${base}${path}` });
      expect(r.status, `${path} ${JSON.stringify(r.body)}`).toBe(200);
      const img = await s.api(`/api/images/${r.body.image_id}`, { key: t.liveKey });
      expect(img.body.data.prompt).toBe(`Uploaded image: ${name}`);
    }
  });

  it('refuses private, link-local and metadata addresses, also behind a redirect', async () => {
    for (const url of [
      'http://10.0.0.5/a.png',
      'http://192.168.1.1/a.png',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/a.png',
      `${base}/to-metadata`,
      `${base}/to-private`,
    ]) {
      const body = await refused({ image_url: url });
      expect(body.error, url).toBe('Image URL is not allowed: it points to a private, loopback, link-local or metadata address');
    }
  });

  it('refuses images over 20 MB', async () => {
    expect((await refused({ image_url: `${base}/too-big.png` })).error).toBe('Image is too large: the upload limit is 20 MB');
  });

  it('refuses more than 4,194,304 pixels', async () => {
    expect((await refused({ image_url: `${base}/huge-pixels.png` })).error).toBe(
      'Image has too many pixels: 2049 x 2048 = 4,196,352; the maximum is 4,194,304',
    );
  });

  it('refuses animated GIFs', async () => {
    expect((await refused({ image_url: `${base}/animated.gif` })).error).toBe(
      'Animated images are not supported: the GIF has 2 frames; upload a single-frame image',
    );
  });

  it('refuses what is not an image and failed fetches', async () => {
    expect((await refused({ image_url: `${base}/page.html` })).error).toBe(
      'URL does not point to a supported image (PNG, JPEG, WebP or single-frame GIF). Content-Type: text/html',
    );
    expect((await refused({ image_url: `${base}/fake.png` })).error).toMatch(/^URL does not point to a supported image/);
    expect((await refused({ image_url: `${base}/nothing-here.png` })).error).toBe('Failed to fetch image from URL: 404');
  });

  it('validates the body', async () => {
    expect(await refused({})).toEqual({ error: 'Invalid request payload', details: ['image_url is required'] });
    expect((await refused({ image_url: 'ftp://example.com/a.png' })).details).toEqual(['image_url must be a valid HTTP or HTTPS URL']);
    expect((await refused({ image_url: 'not a url' })).details).toEqual(['image_url must be a valid HTTP or HTTPS URL']);
    expect((await refused({ image_url: `${base}/photo.png`, mime_type: 'text/plain', session_id: '' })).details).toEqual([
      'mime_type must be one of: image/png, image/jpeg, image/webp, image/gif',
      'session_id must be between 1 and 200 characters',
    ]);
    expect((await refused({ image_url: 5 })).details).toEqual(['image_url must be a string']);
  });

  it('402 when the monthly quota is used up, before anything is stored', async () => {
    const small = await s.createTenant({ monthly_quota_mb: 1 });
    const noise = await sharp(randomBytes(700 * 700 * 3), { raw: { width: 700, height: 700, channels: 3 } })
      .png({ compressionLevel: 0 })
      .toBuffer();
    routes.set('/noise.png', { status: 200, type: 'image/png', body: noise }); // ~1.5 MB
    expect((await upload({ image_url: `${base}/noise.png` }, small.liveKey)).status).toBe(200); // crosses the quota
    await waitFor(async () => (await s.api('/api/profile', { key: small.liveKey })).body?.tenant?.quotas?.monthlyUsedMb >= 1, {
      message: 'usage to catch up (1 MB used)',
      interval: 100,
    });
    const r = await upload({ image_url: `${base}/photo.png` }, small.liveKey);
    expect(r.status).toBe(402);
    expect(r.body).toEqual({ error: 'Monthly storage quota exceeded', code: 'QUOTA_EXCEEDED' });
    expect((await s.api('/api/images', { key: small.liveKey })).body.pagination.total).toBe(1);
  });
});
