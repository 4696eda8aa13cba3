import type { StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { metricsRegistry } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionImagesJsonParts } from '../src/images/store.js';
import { assembleSessionJson, SessionJsonCache, type SessionJsonEntry } from '../src/sessions/json-cache.js';
import { type LibraryHarness, makeImage, startLibrary, storeRequest } from './support.js';

/** An entry rendered whole (no per-image parts) of `size` bytes. */
const entry = (version: string, size: number): SessionJsonEntry => ({ version, json: Buffer.alloc(size, 120) });

describe('assembleSessionJson', () => {
  it('joins new and known images in the rendered order, each part a view of its own object', () => {
    const b = Buffer.from('{"id":1}{"id":2,"p":"é"}');
    const first = assembleSessionJson({
      version: '5',
      images: [
        { key: 'a', json: b.subarray(0, 8) },
        { key: 'b', json: b.subarray(8) },
      ],
    });
    expect(first?.json.toString()).toBe('[{"id":1},{"id":2,"p":"é"}]');
    expect(first?.parts?.get('b')?.toString()).toBe('{"id":2,"p":"é"}');
    const next = assembleSessionJson(
      {
        version: '6',
        images: [
          { key: 'a', json: null },
          { key: 'c', json: Buffer.from('{"id":3}') },
          { key: 'b', json: null },
        ],
      },
      first,
    );
    expect(JSON.parse(next?.json.toString() ?? '')).toEqual([{ id: 1 }, { id: 3 }, { id: 2, p: 'é' }]);
    expect([...(next?.parts?.keys() ?? [])]).toEqual(['a', 'c', 'b']);
    expect(next?.parts?.get('c')?.toString()).toBe('{"id":3}');
    expect(assembleSessionJson({ version: '7', images: [] })?.json.toString()).toBe('[]');
  });

  it('refuses a known key it was not given', () => {
    expect(assembleSessionJson({ version: '6', images: [{ key: 'z', json: null }] })).toBeUndefined();
    const whole = { version: '5', json: Buffer.from('[{"id":1}]') }; // rendered whole: no parts
    expect(assembleSessionJson({ version: '6', images: [{ key: 'a', json: null }] }, whole)).toBeUndefined();
  });
});

describe('SessionJsonCache', () => {
  it('serves an entry at its exact version only, per tenant, session and URL prefix', () => {
    const c = new SessionJsonCache(1000);
    c.set('t', 's', '/p/', entry('7', 10));
    expect(c.get('t', 's', '/p/', '7')?.length).toBe(10);
    expect(c.get('t', 's', '/p/', '8')).toBeUndefined();
    expect(c.get('t', 's', '/q/', '7')).toBeUndefined();
    expect(c.get('t2', 's', '/p/', '7')).toBeUndefined();
    expect(c.get('t', 's2', '/p/', '7')).toBeUndefined();
    expect(c.peek('t', 's', '/p/')?.version).toBe('7');
    expect(c.peek('t', 's2', '/p/')).toBeUndefined();
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

  it('counts the per-image map of an entry in its bound', () => {
    const c = new SessionJsonCache(1000);
    const images = Array.from({ length: 5 }, (_, i) => ({ key: `${i}.1`, json: Buffer.from(`{"id":${i}}`) }));
    const parted = assembleSessionJson({ version: '3', images }) as SessionJsonEntry;
    c.set('t', 's', '', parted);
    expect(c.size).toEqual({ entries: 1, bytes: parted.json.length + 5 * 160 });
    c.set(
      't',
      's',
      '',
      assembleSessionJson({ version: '4', images: [...images, ...images.map((i) => ({ ...i, key: `x${i.key}` }))] }) as SessionJsonEntry,
    );
    // Over 1,000 bytes with its map: not kept (the older version stays, its images still known).
    expect(c.peek('t', 's', '')?.version).toBe('3');
  });

  it('stays within its bytes, the least recently read out first', () => {
    const c = new SessionJsonCache(100);
    c.set('t', 'a', '', entry('1', 38));
    c.set('t', 'b', '', entry('2', 38));
    c.get('t', 'a', '', '1'); // a is now the most recent
    c.set('t', 'c', '', entry('3', 38));
    expect(c.size).toEqual({ entries: 2, bytes: 76 });
    expect(c.peek('t', 'b', '')).toBeUndefined();
    expect(c.peek('t', 'a', '')).toBeDefined();
    expect(c.peek('t', 'c', '')).toBeDefined();
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
    return { session: r.session, prompts: images.map((i) => i.prompt), ids: images.map((i) => i.id), images };
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
    // The first read rendered the session (a miss), the second served it kept (a hit).
    expect(await outcomes()).toEqual({ hit: before.hit + 1, miss: before.miss + 1 });

    const v1 = await version('tK', 'k');
    const second = await store('tK', 'k', { prompt: 'two' });
    expect(BigInt(await version('tK', 'k'))).toBeGreaterThan(BigInt(v1));
    const beforeChanged = await outcomes();
    expect((await detail('tK', 'k')).prompts).toEqual(['one', 'two']);
    expect(await outcomes()).toEqual({ hit: beforeChanged.hit, miss: beforeChanged.miss + 1 }); // kept, but at an older version
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

  it('renders only the images it does not know; a row updated in place is rendered again', async () => {
    for (const prompt of ['u1', 'u2']) await store('tKu', 'u', { prompt });
    const all = await sessionImagesJsonParts(h.sql, 'tKu', 'u', 1000, 'http://files.test/files/', []);
    expect(all?.images.map((i) => JSON.parse(i.json?.toString() ?? 'null')?.prompt)).toEqual(['u1', 'u2']);
    const keys = all?.images.map((i) => i.key) ?? [];
    await store('tKu', 'u', { prompt: 'u3' });
    const next = await sessionImagesJsonParts(h.sql, 'tKu', 'u', 1000, 'http://files.test/files/', keys);
    expect(next?.images.map((i) => i.json && JSON.parse(i.json.toString()).prompt)).toEqual([null, null, 'u3']);
    expect(next?.images.slice(0, 2).map((i) => i.key)).toEqual(keys);
    expect(BigInt(next?.version ?? 0)).toBeGreaterThan(BigInt(all?.version ?? 0));

    // Through the kept rendering: read (kept), one image changed in place (no code path does it; the trigger moves
    // the version and the row's key changes), another stored: the detail has the new prompt, not the kept one.
    expect((await detail('tKu', 'u')).prompts).toEqual(['u1', 'u2', 'u3']);
    await h.sql`UPDATE images SET prompt = 'u2 fixed' WHERE tenant_id = 'tKu' AND prompt = 'u2'`;
    expect((await detail('tKu', 'u')).prompts).toEqual(['u1', 'u2 fixed', 'u3']);
    await store('tKu', 'u', { prompt: 'u4' });
    const d = await detail('tKu', 'u');
    expect(d.prompts).toEqual(['u1', 'u2 fixed', 'u3', 'u4']);
    // And the kept form equals a fresh rendering byte for byte once parsed (the records' form is tested in sessions.test.ts).
    const fresh = await sessionImagesJsonParts(h.sql, 'tKu', 'u', 1000, 'http://files.test/files/', []);
    expect(d.images).toEqual(fresh?.images.map((i) => JSON.parse(String(i.json))));
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
