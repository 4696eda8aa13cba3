import type { StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { metricsRegistry } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionJsonCache } from '../src/sessions/json-cache.js';
import { type LibraryHarness, makeImage, startLibrary, storeRequest } from './support.js';

const entry = (version: string, size: number) => ({ version, json: Buffer.alloc(size, 120) });

describe('SessionJsonCache', () => {
  it('serves an entry at its exact version only, per tenant, session and URL prefix', () => {
    const c = new SessionJsonCache(1000);
    c.set('t', 's', '/p/', entry('7', 10));
    expect(c.get('t', 's', '/p/', '7')?.length).toBe(10);
    expect(c.get('t', 's', '/p/', '8')).toBeUndefined();
    expect(c.get('t', 's', '/q/', '7')).toBeUndefined();
    expect(c.get('t2', 's', '/p/', '7')).toBeUndefined();
    expect(c.get('t', 's2', '/p/', '7')).toBeUndefined();
    expect(c.has('t', 's', '/p/')).toBe(true);
    expect(c.has('t', 's2', '/p/')).toBe(false);
  });

  it("never keeps version '0' or an entry larger than the bound; keeps the newer of two versions", () => {
    const c = new SessionJsonCache(100);
    c.set('t', 's', '', entry('0', 10));
    c.set('t', 'big', '', entry('5', 101));
    expect(c.size).toEqual({ entries: 0, bytes: 0 });
    c.set('t', 's', '', entry('10', 10));
    c.set('t', 's', '', entry('9', 20)); // a render that started earlier finishing later
    expect(c.get('t', 's', '', '10')?.length).toBe(10);
    c.set('t', 's', '', entry('11', 30));
    expect(c.get('t', 's', '', '10')).toBeUndefined();
    expect(c.size).toEqual({ entries: 1, bytes: 30 });
  });

  it('stays within its bytes, the least recently read out first', () => {
    const c = new SessionJsonCache(100);
    c.set('t', 'a', '', entry('1', 40));
    c.set('t', 'b', '', entry('2', 40));
    c.get('t', 'a', '', '1'); // a is now the most recent
    c.set('t', 'c', '', entry('3', 40));
    expect(c.size).toEqual({ entries: 2, bytes: 80 });
    expect(c.has('t', 'b', '')).toBe(false);
    expect(c.has('t', 'a', '')).toBe(true);
    expect(c.has('t', 'c', '')).toBe(true);
  });
});

describe('GetSession as_json through the kept rendering', () => {
  let h: LibraryHarness;
  let png: Buffer;
  beforeAll(async () => {
    h = await startLibrary();
    png = await makeImage(8, 8);
  });
  afterAll(async () => {
    await h?.stop();
  });

  const store = (tenantId: string, sessionId: string, over: Partial<StoreImageRequest> = {}) =>
    h.client.storeImage(storeRequest({ tenantId, sessionId, data: png, ...over }), h.principal(tenantId));
  const detail = async (tenantId: string, sessionId: string) => {
    const r = await h.client.getSession({ sessionId, asJson: true, sessionOnly: false }, h.principal(tenantId));
    const images = JSON.parse(Buffer.from(r.imagesJson).toString('utf8')) as { id: number; prompt: string }[];
    return { session: r.session, prompts: images.map((i) => i.prompt), ids: images.map((i) => i.id) };
  };
  const outcomes = async () => {
    const m = await metricsRegistry.getSingleMetric('imagegen_session_json_cache_total')?.get();
    const of = (o: string) => m?.values.find((v) => v.labels.outcome === o)?.value ?? 0;
    return { hit: of('hit'), miss: of('miss') };
  };
  const version = async (tenantId: string, sessionId: string) =>
    (await h.sql`SELECT images_version::text AS v FROM sessions WHERE tenant_id = ${tenantId} AND session_id = ${sessionId}`)[0]
      ?.v as string;

  it('serves a session read again from the kept JSON, and never a stale one after a store, a delete or a direct insert', async () => {
    await store('tK', 'k', { prompt: 'one' });
    const before = await outcomes();
    const first = await detail('tK', 'k');
    const again = await detail('tK', 'k');
    expect(first.prompts).toEqual(['one']);
    expect(again).toEqual(first);
    expect(await outcomes()).toEqual({ hit: before.hit + 1, miss: before.miss });

    const v1 = await version('tK', 'k');
    const second = await store('tK', 'k', { prompt: 'two' });
    expect(BigInt(await version('tK', 'k'))).toBeGreaterThan(BigInt(v1));
    expect((await detail('tK', 'k')).prompts).toEqual(['one', 'two']);
    expect((await detail('tK', 'k')).session?.totalImages).toBe(2);

    await h.client.deleteImage({ imageId: second.id }, h.principal('tK'));
    expect((await detail('tK', 'k')).prompts).toEqual(['one']);

    // A row written by anything else (a bulk import, another replica): the trigger moves the version too.
    await h.sql`INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height,
      size_bytes, thumbnail_size_bytes, prompt, operation, aspect_ratio, model_id)
      VALUES ('tK', 'k', 'tenants/tK/images/x.png', 'tenants/tK/thumbnails/x.webp', 'image/png', 'png', 1, 1, 1, 1, 'direct',
        'generate', '1:1', 'm')`;
    expect((await detail('tK', 'k')).prompts).toEqual(['one', 'direct']);
  });

  it("is per tenant: another tenant's session of the same id answers its own images, or 404", async () => {
    await store('tKa', 'same', { prompt: 'of a' });
    expect((await detail('tKa', 'same')).prompts).toEqual(['of a']);
    await expect(detail('tKb', 'same')).rejects.toMatchObject({ status: 404, body: { error: 'Session not found' } });
    await store('tKb', 'same', { prompt: 'of b' });
    expect((await detail('tKb', 'same')).prompts).toEqual(['of b']);
    expect((await detail('tKa', 'same')).prompts).toEqual(['of a']);
  });

  it('answers every image stored before the read began while stores and reads run side by side', async () => {
    const stored: string[] = [];
    const reads: Promise<void>[] = [];
    for (let i = 0; i < 12; i++) {
      await store('tKc', 'busy', { prompt: `p${i}` });
      stored.push(`p${i}`);
      const expected = [...stored];
      // Two reads per store, started at once: one may render while the other reads the kept one.
      for (let k = 0; k < 2; k++)
        reads.push(
          detail('tKc', 'busy').then((d) => {
            expect(d.prompts.slice(0, expected.length)).toEqual(expected);
          }),
        );
    }
    await Promise.all(reads);
    expect((await detail('tKc', 'busy')).prompts).toEqual(stored);
  });

  it('a session re-created under the same id never gets the old version back', async () => {
    await store('tKd', 'again', { prompt: 'old' });
    expect((await detail('tKd', 'again')).prompts).toEqual(['old']);
    const old = await version('tKd', 'again');
    await h.sql`DELETE FROM images WHERE tenant_id = 'tKd'`;
    await h.sql`DELETE FROM sessions WHERE tenant_id = 'tKd'`;
    await store('tKd', 'again', { prompt: 'new' });
    expect(await version('tKd', 'again')).not.toBe(old);
    expect((await detail('tKd', 'again')).prompts).toEqual(['new']);
  });
});
