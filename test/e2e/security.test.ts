import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createFsStorage, type ObjectStorage } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/stack.js';

// GET /files/* as an attacker sees it: objects written straight into the stack's filesystem storage.
let s: TestStack;
let storage: ObjectStorage;
const T = 'tenants/tsec/images';

beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  const objects = join(s.env.DATA_DIR, 'objects');
  storage = createFsStorage({ dir: objects, publicBaseUrl: s.baseUrl });
  await storage.put(`${T}/ok.png`, Buffer.from('png bytes'), 'image/png');
  await storage.put(`${T}/x.svg`, Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'), 'image/svg+xml');
  await storage.put(`${T}/page.png`, Buffer.from('<html><script>alert(1)</script></html>'), 'text/html; charset=utf-8');
  // Something outside the storage root, and links to it planted inside.
  await writeFile(join(s.env.DATA_DIR, 'secret.txt'), 'TOP SECRET');
  await mkdir(join(s.env.DATA_DIR, 'outside'));
  await writeFile(join(s.env.DATA_DIR, 'outside', 'a.png'), 'OUTSIDE');
  await symlink(join(s.env.DATA_DIR, 'secret.txt'), join(objects, T, 'link.png'));
  await symlink(join(s.env.DATA_DIR, 'outside'), join(objects, 'tenants/tsec/dirlink'));
});

afterAll(async () => {
  await s?.stop();
});

const get = (path: string, init?: RequestInit) => fetch(`${s.baseUrl}${path}`, init);

describe('GET /files/* hardening', () => {
  it('serves raster images inline with nosniff and a sandboxing CSP', async () => {
    const r = await get(`/files/${T}/ok.png`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('image/png');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('content-security-policy')).toContain('sandbox');
    expect(r.headers.get('content-disposition')).toBeNull();
    expect(await r.text()).toBe('png bytes');
  });

  it('serves scriptable types (SVG, HTML) only as downloads, on GET and HEAD', async () => {
    for (const key of [`${T}/x.svg`, `${T}/page.png`]) {
      for (const method of ['GET', 'HEAD']) {
        const r = await get(`/files/${key}`, { method });
        expect(r.status, `${method} ${key}`).toBe(200);
        expect(r.headers.get('content-disposition'), `${method} ${key}`).toBe('attachment');
        expect(r.headers.get('x-content-type-options')).toBe('nosniff');
        expect(r.headers.get('content-security-policy')).toContain('sandbox');
        await r.arrayBuffer();
      }
    }
  });

  it('does not follow links that leave the storage root', async () => {
    for (const path of [`/files/${T}/link.png`, '/files/tenants/tsec/dirlink/a.png']) {
      for (const method of ['GET', 'HEAD']) {
        const r = await get(path, { method });
        expect(r.status, `${method} ${path}`).toBe(404);
        const body = await r.text();
        expect(body).not.toContain('SECRET');
        expect(body).not.toContain('OUTSIDE');
      }
    }
  });

  it('answers 404 for encoded traversal, backslashes, NUL and hidden names', async () => {
    for (const path of [
      `/files/${T}/%2e%2e/%2e%2e/%2e%2e/secret.txt`,
      `/files/${T}/..%2f..%2f..%2fsecret.txt`,
      `/files/${T}/%2E%2E%2F%2E%2E%2F%2E%2E%2Fsecret.txt`,
      `/files/${T}/..%5c..%5c..%5csecret.txt`,
      `/files/${T}/%252e%252e/%252e%252e/%252e%252e/secret.txt`,
      `/files/${T}/ok.png%00.txt`,
      `/files/${T}/.x.svg.ct`,
      '/files//etc/passwd',
      '/files/%2Fetc%2Fpasswd',
      `/files/${T}/`,
    ]) {
      const r = await get(path);
      // A NUL character is refused at the edge, before any lookup (400 Invalid request payload).
      expect(r.status, path).toBe(path.includes('%00') ? 400 : 404);
      const body = await r.text();
      expect(body, path).not.toContain('SECRET');
      expect(body, path).not.toContain('root:');
    }
  });
});

describe('API responses', () => {
  it('carry X-Content-Type-Options: nosniff on JSON, errors and 404s', async () => {
    const t = await s.createTenant();
    const responses = [
      await get('/api/profile', { headers: { 'x-api-key': t.liveKey } }),
      await get('/api/profile'),
      await get('/api/no-such-route'),
      await get('/health'),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 401, 404, 200]);
    for (const r of responses) expect(r.headers.get('x-content-type-options'), r.url).toBe('nosniff');
  });
});
