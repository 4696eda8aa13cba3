import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';

/**
 * Numbers beyond the gRPC wire types (paging is int32; ids and byte sizes int64, read back as safe
 * integers) cannot be encoded between services. Paging beyond int32 is 400; elsewhere such a number is
 * refused (400), not found (404; a path identifier may also be a name) or, for a size filter, simply
 * matches nothing: never a 500.
 */
let s: TestStack;
let t: TestTenant;
beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  t = await s.createTenant();
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const HUGE = ['3000000000', '-3000000000', '9007199254740993', '99999999999999999999', '1e20'];

const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = { 'x-api-key': t.liveKey }) =>
  fetch(s.baseUrl + path, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe('numbers beyond the wire ranges', () => {
  it('paging offsets and pages: 400 Invalid request payload', async () => {
    const paths = [
      '/api/images?offset=X',
      '/api/sessions?offset=X',
      '/api/characters?offset=X',
      '/api/scenes?offset=X',
      '/api/style-presets?offset=X',
      '/api/search-presets/1/images?offset=X',
      '/api/products?page=X',
    ];
    for (const p of paths) {
      for (const n of ['3000000000', '99999999999999999999']) {
        const r = await send('GET', p.replace('X', n));
        expect(r.status, `${p} ${n}`).toBe(400);
        expect(((await r.json()) as { error: string }).error).toBe('Invalid request payload');
      }
    }
  });

  it('ids and sizes in queries, paths and bodies: never 5xx', async () => {
    const gets = [
      '/api/images/X',
      '/api/images?minSize=X',
      '/api/images?maxSize=X',
      '/api/images?stylePresetId=X',
      '/api/images?productReferenceId=X',
      '/api/characters/X',
      '/api/products/X',
      '/api/scenes/X',
      '/api/style-presets/X',
      '/api/search-presets/X',
      '/api/search-presets/X/images',
      '/api/webhooks/X',
      '/api/executions/X',
      '/api/sessions/X',
    ];
    for (const g of gets) {
      for (const n of HUGE) {
        const r = await send('GET', g.replace('X', n));
        expect(r.status, `GET ${g} ${n}: ${await r.text()}`).toBeLessThan(500);
      }
    }
    const bodies: [string, string, (n: number) => unknown][] = [
      ['POST', '/api/images/delete-bulk', (n) => ({ ids: [n] })],
      ['POST', '/api/images/download', (n) => ({ imageIds: [n] })],
      ['POST', '/api/edit-image', (n) => ({ image_id: n, prompt: 'make it blue' })],
      ['POST', '/api/images', (n) => ({ prompt: 'a lighthouse', n, style_preset_id: n })],
      ['POST', '/api/characters', (n) => ({ character_name: 'Ada', base_prompt: 'a woman in a red coat', reference_image_ids: [n] })],
      ['POST', '/api/characters/generate-multi', (n) => ({ character_ids: [n, 1], scene_prompt: 'two friends at a table' })],
      ['POST', '/api/scenes', (n) => ({ scene_name: 'Beach', reference_image_ids: [n] })],
      ['DELETE', '/api/webhooks', (n) => ({ id: n })],
    ];
    for (const [method, path, body] of bodies) {
      for (const n of [3e9, -3e9, 2 ** 53 + 2, 1e20]) {
        const r = await send(method, path, body(n));
        expect(r.status, `${method} ${path} ${n}: ${await r.text()}`).toBeLessThan(500);
      }
    }
  });
});
