import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ImageDeleted, ImageStored } from '@imagegen/contracts/events/v1/events';
import type { StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { AppError, createDb } from '@imagegen/platform';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { NoCredentials } from '../src/credentials/c2pa.js';
import { storeImage } from '../src/images/store-image.js';
import { type LibraryHarness, makeImage, startLibrary, storeRequest } from './support.js';

let h: LibraryHarness;
beforeAll(async () => {
  h = await startLibrary();
});
afterAll(async () => {
  await h?.stop();
});

const req = (over: Partial<StoreImageRequest>): StoreImageRequest =>
  storeRequest({
    sessionId: 's1',
    prompt: 'a red fox',
    aspectRatio: '1:1',
    modelId: 'provA-flash-lite-image',
    resolutionTier: '1K',
    keyType: '',
    ...over,
  });

const filesUnder = (tenant: string) => {
  try {
    return ['images', 'thumbnails'].flatMap((d) =>
      readdirSync(join(h.dataDir, 'objects', 'tenants', tenant, d)).filter((f) => !f.startsWith('.')),
    );
  } catch {
    return [];
  }
};

describe('StoreImage', () => {
  it('stores the original and a 200x200 webp thumbnail under tenant keys and publishes ImageStored', async () => {
    const data = await makeImage(1024, 512);
    const rec = await h.client.storeImage(req({ tenantId: 'tA', data, negativePrompt: 'blurry', tokens: 42 }), h.principal('tA'));
    expect(rec.id).toBeGreaterThan(0);
    expect(rec.tenantId).toBe('tA');
    expect(rec.sessionId).toBe('s1');
    expect(rec.objectKey).toMatch(/^tenants\/tA\/images\/[0-9a-f-]+\.png$/);
    expect(rec.thumbnailKey).toMatch(/^tenants\/tA\/thumbnails\/[0-9a-f-]+\.webp$/);
    expect(rec.fullUrl).toBe(`http://files.test/files/${rec.objectKey}`);
    expect(rec.thumbnailUrl).toBe(`http://files.test/files/${rec.thumbnailKey}`);
    expect([rec.width, rec.height, rec.format, rec.mimeType]).toEqual([1024, 512, 'png', 'image/png']);
    expect(rec.sizeBytes).toBe(data.length);
    expect(rec.negativePrompt).toBe('blurry');
    expect(rec.resolutionTier).toBe('1k');
    expect(rec.keyType).toBe('live');
    expect(rec.hasReferenceGroupIds).toBe(false);
    expect(Date.parse(rec.createdAt)).not.toBeNaN();

    const original = await h.ctx.storage.get(rec.objectKey);
    expect(original.equals(data)).toBe(true);
    const thumb = await h.ctx.storage.get(rec.thumbnailKey);
    expect(rec.thumbnailSizeBytes).toBe(thumb.length);
    const tm = await sharp(thumb).metadata();
    expect([tm.format, tm.width, tm.height]).toEqual(['webp', 200, 100]);
    expect((await h.ctx.storage.stat(rec.thumbnailKey))?.contentType).toBe('image/webp');

    const storedEvents = () => h.events.filter((e) => e.subject.endsWith('.library.image_stored')).map((e) => ImageStored.decode(e.data));
    await waitFor(() => storedEvents().some((e) => e.imageId === rec.id));
    const ev = storedEvents().find((e) => e.imageId === rec.id);
    expect(ev).toMatchObject({
      tenantId: 'tA',
      imageId: rec.id,
      sizeBytes: data.length,
      thumbnailSizeBytes: thumb.length,
      modelId: 'provA-flash-lite-image',
      operation: 'generate',
      sessionId: 's1',
      keyType: 'live',
      occurredAt: rec.createdAt,
    });
    const [s] = await h.sql`SELECT * FROM sessions WHERE tenant_id = 'tA' AND session_id = 's1'`;
    expect(s.image_count).toBe(1);
  });

  it('applies EXIF orientation, never enlarges, keeps jpeg/webp originals', async () => {
    const rotated = await makeImage(300, 100, { format: 'jpeg', orientation: 6 });
    const r1 = await h.client.storeImage(req({ tenantId: 'tA', data: rotated }), h.principal('tA'));
    expect([r1.width, r1.height, r1.format, r1.mimeType]).toEqual([100, 300, 'jpeg', 'image/jpeg']);
    expect(r1.objectKey).toMatch(/\.jpg$/);
    const t1 = await sharp(await h.ctx.storage.get(r1.thumbnailKey)).metadata();
    expect([t1.width, t1.height]).toEqual([67, 200]);

    const small = await makeImage(50, 40, { format: 'webp' });
    const r2 = await h.client.storeImage(req({ tenantId: 'tA', data: small }), h.principal('tA'));
    const t2 = await sharp(await h.ctx.storage.get(r2.thumbnailKey)).metadata();
    expect([t2.width, t2.height]).toEqual([50, 40]);
    expect(r2.format).toBe('webp');
  });

  it('takes the tenant from the principal when the request has none, and records optional links', async () => {
    const rec = await h.client.storeImage(
      req({
        data: await makeImage(64, 64),
        parentImageId: 7,
        stylePresetId: 3,
        productReferenceId: 4,
        characterId: 5,
        referenceGroupIds: [1, 2],
        isReference: true,
        keyType: 'test',
        operation: 'edit',
      }),
      h.principal('tP'),
    );
    expect(rec.tenantId).toBe('tP');
    expect(rec).toMatchObject({
      parentImageId: 7,
      stylePresetId: 3,
      productReferenceId: 4,
      characterId: 5,
      referenceGroupIds: [1, 2],
      hasReferenceGroupIds: true,
      isReference: true,
      keyType: 'test',
      operation: 'edit',
    });
  });

  it('never stores for another tenant than the calling one', async () => {
    const data = await makeImage(16, 16);
    const err = await h.client.storeImage(req({ tenantId: 'tVictim', data }), h.principal('tIntruder')).catch((e) => e);
    expect(err).toMatchObject({ status: 403 });
    const touch = await h.client.touchSession({ sessionId: 's1', tenantId: 'tVictim' }, h.principal('tIntruder')).catch((e) => e);
    expect(touch).toMatchObject({ status: 403 });
    const rows = await h.sql`SELECT count(*)::int AS n FROM images WHERE tenant_id = 'tVictim'`;
    expect(rows[0].n).toBe(0);
    const sessions = await h.sql`SELECT count(*)::int AS n FROM sessions WHERE tenant_id = 'tVictim'`;
    expect(sessions[0].n).toBe(0);
  });

  it('generates a session id when none is given and refuses invalid ones', async () => {
    const rec = await h.client.storeImage(req({ tenantId: 'tA', sessionId: '', data: await makeImage(10, 10) }), h.principal('tA'));
    expect(rec.sessionId).toMatch(/^session_/);
    await expect(
      h.client.storeImage(req({ tenantId: 'tA', sessionId: 'x'.repeat(201), data: await makeImage(10, 10) }), h.principal('tA')),
    ).rejects.toMatchObject({
      status: 400,
      body: { error: 'Invalid request payload', details: ['session_id must be between 1 and 200 characters'] },
    });
    const long = await h.client.storeImage(
      req({ tenantId: 'tA', sessionId: 'y'.repeat(200), data: await makeImage(10, 10) }),
      h.principal('tA'),
    );
    expect(long.sessionId).toHaveLength(200);
  });

  it('refuses data that is not an image (or an SVG) with 400 and leaves no files', async () => {
    const before = filesUnder('tBad').length;
    const cases: [Buffer, string][] = [
      [Buffer.from('not an image'), 'the data is not a decodable image'],
      // Refused by its header: an SVG is never rendered (only the four accepted formats are, see decodeAndThumbnail).
      [Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'), 'unsupported image format: svg'],
    ];
    for (const [data, detail] of cases) {
      const err = await h.client.storeImage(req({ tenantId: 'tBad', data }), h.principal('tBad')).catch((e) => e);
      expect(err).toBeInstanceOf(AppError);
      expect(err.status).toBe(400);
      expect(err.body).toEqual({ error: 'Invalid image data', details: [detail] });
    }
    await expect(h.client.storeImage(req({ tenantId: 'tBad' }), h.principal('tBad'))).rejects.toMatchObject({ status: 400 });
    expect(filesUnder('tBad').length).toBe(before);
  });

  it('refuses bytes that announce a PNG but do not decode, removing the original written during the image work', async () => {
    const good = await makeImage(64, 64);
    // A valid signature and header, then garbage where the image data should be: the original's write starts
    // as soon as the session check passes, and sharp fails only afterwards.
    const corrupt = Buffer.concat([good.subarray(0, 33), Buffer.alloc(4000, 0x5a)]);
    const before = filesUnder('tCorrupt').length;
    const err = await h.client.storeImage(req({ tenantId: 'tCorrupt', data: corrupt }), h.principal('tCorrupt')).catch((e) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err.status).toBe(400);
    // The thumbnail started beside the header read (the bytes announce a PNG); the header read refuses the
    // garbage after IHDR first, and the thumbnail's own failure is swallowed (no unhandled rejection).
    expect(err.body).toEqual({ error: 'Invalid image data', details: ['the data is not a decodable image'] });
    expect(filesUnder('tCorrupt').length).toBe(before);
    // Nothing left for the sweeper either: the keys were claimed when their files were removed.
    const [gc] = await h.sql`SELECT count(*)::int AS n FROM object_gc WHERE object_key LIKE 'tenants/tCorrupt/%'`;
    expect(gc.n).toBe(0);
  });

  it('refuses the 1,001st image of a session and removes the files it wrote', async () => {
    await h.client.touchSession({ sessionId: 'full', tenantId: 'tFull' }, h.principal('tFull'));
    await h.sql`UPDATE sessions SET image_count = 999 WHERE tenant_id = 'tFull' AND session_id = 'full'`;
    const ok = await h.client.storeImage(
      req({ tenantId: 'tFull', sessionId: 'full', data: await makeImage(20, 20) }),
      h.principal('tFull'),
    );
    expect(ok.id).toBeGreaterThan(0);
    const info = await h.client.touchSession({ sessionId: 'full', tenantId: '' }, h.principal('tFull'));
    expect(info).toMatchObject({ imageCount: 1000, remaining: 0, created: false });
    const files = filesUnder('tFull').length;
    await expect(
      h.client.storeImage(req({ tenantId: 'tFull', sessionId: 'full', data: await makeImage(20, 20) }), h.principal('tFull')),
    ).rejects.toMatchObject({ status: 400, body: { error: 'Session image limit reached' } });
    expect(filesUnder('tFull').length).toBe(files);
    const [s] = await h.sql`SELECT is_active FROM sessions WHERE tenant_id = 'tFull' AND session_id = 'full'`;
    expect(s.is_active).toBe(false);
  });

  it('removes the files again when the transaction fails (lock-time session check)', async () => {
    // Pre-check sees 0 images; the authoritative check under the row lock sees a full session.
    const deps = { sql: h.sql, storage: h.ctx.storage, config: h.ctx.config, credentials: new NoCredentials() };
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count) VALUES ('tRace', 'r', 0)`;
    const data = await makeImage(20, 20);
    // Its own connection: the store takes the other one of h.sql while the transaction below holds the first.
    const monitor = createDb(h.ctx.config.databaseUrl as string, { schema: 'library', max: 1 });
    let locked!: () => void;
    const lockTaken = new Promise<void>((r) => (locked = r));
    const p = (async () => {
      await h.sql.begin(async (tx) => {
        await tx`SELECT 1 FROM sessions WHERE tenant_id = 'tRace' AND session_id = 'r' FOR UPDATE`;
        locked();
        // The session fills up while the store (past its pre-check, its files written) waits for the row.
        await waitFor(
          async () =>
            (
              await monitor`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
            )[0].n > 0,
          { message: 'the store waiting for the session row' },
        );
        await tx`UPDATE sessions SET image_count = 1000 WHERE tenant_id = 'tRace' AND session_id = 'r'`;
      });
    })();
    try {
      await lockTaken;
      await expect(storeImage(deps, { tenantId: 'tRace', sessionId: 'r', data, operation: 'generate' })).rejects.toMatchObject({
        status: 400,
      });
      await p;
    } finally {
      await monitor.end();
    }
    expect(filesUnder('tRace')).toEqual([]);
  });

  it('counts concurrent stores into one session exactly', async () => {
    const data = await makeImage(16, 16);
    await Promise.all(
      Array.from({ length: 8 }, () => h.client.storeImage(req({ tenantId: 'tConc', sessionId: 'c', data }), h.principal('tConc'))),
    );
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tConc' AND session_id = 'c'`;
    expect(s.image_count).toBe(8);
  });
  it('mixes concurrent stores and deletes in one session without deadlocks; counters stay exact', async () => {
    const p = h.principal('tMix');
    const data = await makeImage(16, 16);
    const first = await Promise.all(
      Array.from({ length: 6 }, () => h.client.storeImage(req({ tenantId: 'tMix', sessionId: 'm', data }), p)),
    );
    await Promise.all([
      ...first.map((r) => h.client.deleteImage({ imageId: r.id }, p)),
      ...Array.from({ length: 6 }, () => h.client.storeImage(req({ tenantId: 'tMix', sessionId: 'm', data }), p)),
    ]);
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tMix' AND session_id = 'm'`;
    const [t] = await h.sql`SELECT image_count FROM tenant_stats WHERE tenant_id = 'tMix'`;
    const [c] = await h.sql`SELECT count(*)::int AS n FROM images WHERE tenant_id = 'tMix'`;
    expect([s.image_count, Number(t.image_count), c.n]).toEqual([6, 6, 6]);
    const list = await h.client.listImages({ limit: 0, offset: 0, resolutionTiers: [], asJson: false }, p);
    expect(list.total).toBe(6);
  });
});

describe('GetImageData / GetObjectData', () => {
  it('returns the bytes of the caller tenant only', async () => {
    const data = await makeImage(32, 32);
    const rec = await h.client.storeImage(req({ tenantId: 'tD', data }), h.principal('tD'));
    const got = await h.client.getImageData({ imageId: rec.id }, h.principal('tD'));
    expect(Buffer.from(got.data).equals(data)).toBe(true);
    expect(got.mimeType).toBe('image/png');
    expect(got.image?.id).toBe(rec.id);
    await expect(h.client.getImageData({ imageId: rec.id }, h.principal('tOther'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Image not found' },
    });
    await expect(h.client.getImageData({ imageId: 999999 }, h.principal('tD'))).rejects.toMatchObject({ status: 404 });

    const obj = await h.client.getObjectData({ objectKey: rec.thumbnailKey }, h.principal('tD'));
    expect(obj.mimeType).toBe('image/webp');
    expect(obj.data.length).toBe(rec.thumbnailSizeBytes);
    for (const objectKey of [rec.objectKey, 'tenants/tD/../tOther/x.png', '/etc/passwd', '', 'tenants/tDx/images/a.png']) {
      await expect(h.client.getObjectData({ objectKey }, h.principal('tOther'))).rejects.toMatchObject({ status: 404 });
    }
    await expect(h.client.getObjectData({ objectKey: 'tenants/tD/images/missing.png' }, h.principal('tD'))).rejects.toMatchObject({
      status: 404,
    });
  });
});

describe('DeleteImage', () => {
  it('removes row and files, keeps edit children, publishes ImageDeleted, adjusts the session', async () => {
    const parent = await h.client.storeImage(req({ tenantId: 'tDel', sessionId: 'd', data: await makeImage(40, 40) }), h.principal('tDel'));
    const child = await h.client.storeImage(
      req({ tenantId: 'tDel', sessionId: 'd', data: await makeImage(40, 40), operation: 'edit', parentImageId: parent.id }),
      h.principal('tDel'),
    );
    await expect(h.client.deleteImage({ imageId: parent.id }, h.principal('tOther'))).rejects.toMatchObject({ status: 404 });
    await h.client.deleteImage({ imageId: parent.id }, h.principal('tDel'));
    // The files stay for OBJECT_DELETE_GRACE (7 days by default; a restored backup still finds them), not served.
    for (const key of [parent.objectKey, parent.thumbnailKey]) {
      expect(await h.ctx.storage.stat(key)).not.toBeNull();
      expect(await h.client.objectServable({ objectKey: key }, h.principal('tDel'))).toEqual({ servable: false });
    }
    const [due] = await h.sql`SELECT min(due_at) > now() + interval '6 days 23 hours' AS later FROM object_gc
      WHERE object_key IN (${parent.objectKey}, ${parent.thumbnailKey})`;
    expect(due.later).toBe(true);
    expect(await h.client.objectServable({ objectKey: child.objectKey }, h.principal('tDel'))).toEqual({ servable: true });
    const detail = await h.client.getImage({ imageId: child.id }, h.principal('tDel'));
    expect(detail.image?.parentImageId).toBe(parent.id);
    expect(detail.ancestors).toEqual([]);
    await expect(h.client.getImage({ imageId: parent.id }, h.principal('tDel'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Image not found' },
    });
    const deletedEvents = () =>
      h.events.filter((e) => e.subject.endsWith('.library.image_deleted')).map((e) => ImageDeleted.decode(e.data));
    await waitFor(() => deletedEvents().some((e) => e.imageId === parent.id));
    const ev = deletedEvents().find((e) => e.imageId === parent.id);
    expect(ev).toMatchObject({ tenantId: 'tDel', imageId: parent.id, sizeBytes: parent.sizeBytes, storedAt: parent.createdAt });
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tDel' AND session_id = 'd'`;
    expect(s.image_count).toBe(1);
  });

  it('bulk-deletes own ids and reports foreign and missing ones', async () => {
    const mine = await h.client.storeImage(req({ tenantId: 'tB1', data: await makeImage(8, 8) }), h.principal('tB1'));
    const theirs = await h.client.storeImage(req({ tenantId: 'tB2', data: await makeImage(8, 8) }), h.principal('tB2'));
    const r = await h.client.deleteImages({ imageIds: [mine.id, theirs.id, 987654] }, h.principal('tB1'));
    expect(r.deleted).toEqual([mine.id]);
    expect(r.failed).toEqual([
      { id: theirs.id, error: 'Image not found' },
      { id: 987654, error: 'Image not found' },
    ]);
    expect((await h.client.getImage({ imageId: theirs.id }, h.principal('tB2'))).image?.id).toBe(theirs.id);
  });
});

describe('GetImage edit history', () => {
  it('lists the ancestor chain oldest first and the direct edits', async () => {
    const p = h.principal('tH');
    const a = await h.client.storeImage(req({ tenantId: 'tH', data: await makeImage(8, 8), prompt: 'root' }), p);
    const b = await h.client.storeImage(
      req({ tenantId: 'tH', data: await makeImage(8, 8), operation: 'edit', parentImageId: a.id, prompt: 'b' }),
      p,
    );
    const c = await h.client.storeImage(
      req({ tenantId: 'tH', data: await makeImage(8, 8), operation: 'edit', parentImageId: b.id, prompt: 'c' }),
      p,
    );
    const d = await h.client.storeImage(
      req({ tenantId: 'tH', data: await makeImage(8, 8), operation: 'edit', parentImageId: b.id, prompt: 'd' }),
      p,
    );
    const detail = await h.client.getImage({ imageId: b.id }, p);
    expect(detail.ancestors.map((e) => e.id)).toEqual([a.id]);
    expect(detail.edits.map((e) => e.id)).toEqual([c.id, d.id]);
    const dc = await h.client.getImage({ imageId: c.id }, p);
    expect(dc.ancestors.map((e) => e.id)).toEqual([a.id, b.id]);
    expect(dc.ancestors[1]).toMatchObject({ operation: 'edit', prompt: 'b', parentImageId: a.id, fullUrl: b.fullUrl });
    // A foreign tenant's image with the same parent id is never part of the chain.
    await h.client.storeImage(
      req({ tenantId: 'tH2', data: await makeImage(8, 8), operation: 'edit', parentImageId: b.id }),
      h.principal('tH2'),
    );
    expect((await h.client.getImage({ imageId: b.id }, p)).edits).toHaveLength(2);
  });
});
