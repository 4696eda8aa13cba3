import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ExecutionFinished, ImageStored } from '@imagegen/contracts/events/v1/events';
import { GetImageRequest, ListImagesRequest, type StoreImageRequest } from '@imagegen/contracts/library/v1/library';
import { createDb, metricsText, subjectFor, writeOutbox } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { scheduleRemoval, sweepObjects } from '../src/images/object-gc.js';
import { commitExecutionImages, committedHere, discardStalePending, forgetPendingImages } from '../src/images/pending.js';
import { type LibraryHarness, makeImage, startLibrary, storeRequest } from './support.js';

/**
 * Two-phase storing: an execution's images are listed and billed (ImageStored) only once the execution
 * completed; a failed execution's are removed with their files; files that no row owns (a crash between
 * the file writes and the commit, or between a delete's commit and its file removal) are swept.
 */
let h: LibraryHarness;
let png: Buffer;
beforeAll(async () => {
  h = await startLibrary();
  png = await makeImage(64, 48);
});
afterAll(async () => {
  await h?.stop();
});

const req = (tenantId: string, executionId: string, over: Partial<StoreImageRequest> = {}): StoreImageRequest =>
  storeRequest({
    tenantId,
    sessionId: `s-${executionId}`,
    data: png,
    prompt: 'pending fox',
    aspectRatio: '4:3',
    modelId: 'provA-flash-lite-image',
    resolutionTier: '1k',
    executionId,
    pending: true,
    ...over,
  });

const file = (key: string) => join(h.dataDir, 'objects', key);
const storedEventsOf = (tenantId: string) =>
  h.events.filter((m) => m.subject.endsWith('library.image_stored') && ImageStored.decode(m.data).tenantId === tenantId);
/**
 * Stores and lists an image of a tenant of its own and waits for its ImageStored event: the outbox publishes in
 * order, so an event written before it (one that must not be) has arrived by then too.
 */
let markers = 0;
async function eventsFlushed(): Promise<void> {
  const tenantId = `tMarker${++markers}`;
  await h.client.storeImage(req(tenantId, `exec-marker-${markers}`, { pending: false }), h.principal(tenantId));
  await waitFor(() => storedEventsOf(tenantId).length === 1, { message: `the ImageStored event of ${tenantId}` });
}
/** Statements of this database waiting for a lock (another connection than the caller's). */
const waitingForLock = async () =>
  (
    await h.sql`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`
  )[0].n as number;
const listed = async (tenantId: string) =>
  (await h.client.listImages(ListImagesRequest.fromPartial({ limit: 50 }), h.principal(tenantId))).images.length;

/**
 * Commits one stored pending image, as the process that stored it or (`forget`) as a replica that did not (the commit
 * reads the pending row back), and returns how many were committed and the listed row's thumbnail size.
 */
async function commitOne(tenantId: string, executionId: string, id: number, forget: boolean) {
  if (forget) forgetPendingImages();
  const c = await h.client.commitExecutionImages({ tenantId, executionId, imageIds: [id] }, h.principal(tenantId));
  const [row] = await h.sql`SELECT thumbnail_size_bytes FROM images WHERE id = ${id}`;
  return { committed: c.committed, thumbnailSizeBytes: Number(row?.thumbnail_size_bytes) };
}

async function finish(
  tenantId: string,
  executionId: string,
  status: 'completed' | 'failed',
  imageIds: number[] = [],
  images = imageIds.length,
) {
  await h.sql.begin((tx) =>
    writeOutbox(tx, {
      subject: subjectFor(h.ctx.config.eventsPrefix, 'generation.execution_finished'),
      data: ExecutionFinished.encode({
        tenantId,
        executionId,
        sessionId: `s-${executionId}`,
        toolName: 'generate_image',
        status,
        durationMs: 1,
        occurredAt: new Date().toISOString(),
        keyType: 'live',
        images,
        imageIds,
      }).finish(),
    }),
  );
}

describe('pending images', () => {
  it('are neither listed nor billed until CommitExecutionImages, then keep their id', async () => {
    const rec = await h.client.storeImage(req('tP1', 'exec-1'), h.principal('tP1'));
    expect(existsSync(file(rec.objectKey))).toBe(true);
    expect(await listed('tP1')).toBe(0);
    await expect(h.client.getImage(GetImageRequest.fromPartial({ imageId: rec.id }), h.principal('tP1'))).rejects.toMatchObject({
      status: 404,
    });
    await eventsFlushed();
    expect(storedEventsOf('tP1')).toHaveLength(0);

    const c = await h.client.commitExecutionImages({ tenantId: 'tP1', executionId: 'exec-1', imageIds: [] }, h.principal('tP1'));
    expect(c.committed).toBe(1);
    expect(await listed('tP1')).toBe(1);
    expect((await h.client.getImage(GetImageRequest.fromPartial({ imageId: rec.id }), h.principal('tP1'))).image?.id).toBe(rec.id);
    await waitFor(() => storedEventsOf('tP1').length === 1);
    // Idempotent: a second commit (the event consumer after the call) moves nothing and bills nothing.
    expect(
      (await h.client.commitExecutionImages({ tenantId: 'tP1', executionId: 'exec-1', imageIds: [] }, h.principal('tP1'))).committed,
    ).toBe(0);
    await eventsFlushed();
    expect(storedEventsOf('tP1')).toHaveLength(1);
  });

  it('the same ImageStored events whether the commit knew the images (one statement) or read them back', async () => {
    const eventsOf = (tenantId: string) =>
      storedEventsOf(tenantId)
        .map((m) => ImageStored.decode(m.data))
        .map(({ tenantId: _t, ...e }) => e)
        .sort((a, b) => a.imageId - b.imageId);
    const commitBoth = async (tenantId: string, forget: boolean) => {
      const a = await h.client.storeImage(req(tenantId, `exec-${tenantId}`, { sessionId: 'same' }), h.principal(tenantId));
      const b = await h.client.storeImage(req(tenantId, `exec-${tenantId}`, { sessionId: 'same' }), h.principal(tenantId));
      if (forget) forgetPendingImages(); // as a library replica that did not store them
      const c = await h.client.commitExecutionImages(
        { tenantId: '', executionId: `exec-${tenantId}`, imageIds: [b.id, a.id] },
        h.principal(tenantId),
      );
      expect(c.committed).toBe(2);
      await waitFor(() => storedEventsOf(tenantId).length === 2);
      return eventsOf(tenantId).map((e, i) => ({ ...e, imageId: i, occurredAt: e.occurredAt.length }));
    };
    const known = await commitBoth('tP13', false);
    const readBack = await commitBoth('tP14', true);
    expect(known).toEqual(readBack);
    expect(known[0]).toMatchObject({ sizeBytes: png.length, operation: 'generate', modelId: 'provA-flash-lite-image', sessionId: 'same' });
    // Each event names its own image, with the row's creation time.
    const rows = await h.sql`SELECT id, created_at FROM images WHERE tenant_id = 'tP13' ORDER BY id`;
    expect(eventsOf('tP13').map((e) => [e.imageId, e.occurredAt])).toEqual(rows.map((r) => [Number(r.id), r.created_at.toISOString()]));
  });

  it("records the thumbnail's size in the row and its event on both commit paths", async () => {
    for (const [tenantId, forget] of [
      ['tP15', false],
      ['tP16', true],
    ] as const) {
      const rec = await h.client.storeImage(req(tenantId, `exec-${tenantId}`), h.principal(tenantId));
      const onDisk = statSync(file(rec.thumbnailKey)).size;
      expect(onDisk).toBeGreaterThan(0);
      expect(rec.thumbnailSizeBytes).toBe(onDisk);
      // The row went in while the thumbnail rendered: the answer has the size, the pending row none (migration 290).
      const [pendingRow] = await h.sql`SELECT thumbnail_size_bytes FROM pending_images WHERE id = ${rec.id}`;
      expect(pendingRow.thumbnail_size_bytes).toBeNull();
      expect(await commitOne(tenantId, `exec-${tenantId}`, rec.id, forget)).toEqual({ committed: 1, thumbnailSizeBytes: onDisk });
      await waitFor(() => storedEventsOf(tenantId).length === 1);
      expect(ImageStored.decode(storedEventsOf(tenantId)[0].data).thumbnailSizeBytes).toBe(onDisk);
    }
  });

  it('a pending row that holds its thumbnail size (written before migration 290) keeps it on both commit paths', async () => {
    for (const [tenantId, forget] of [
      ['tP18', false],
      ['tP19', true],
    ] as const) {
      const rec = await h.client.storeImage(req(tenantId, `exec-${tenantId}`), h.principal(tenantId));
      await h.sql`UPDATE pending_images SET thumbnail_size_bytes = 4321 WHERE id = ${rec.id}`;
      expect(await commitOne(tenantId, `exec-${tenantId}`, rec.id, forget)).toEqual({ committed: 1, thumbnailSizeBytes: 4321 });
    }
  });

  it('a commit elsewhere whose thumbnail object went missing lists the image with a 0-byte thumbnail, billed once', async () => {
    const rec = await h.client.storeImage(req('tP20', 'exec-tP20'), h.principal('tP20'));
    rmSync(file(rec.thumbnailKey));
    // Committed by a replica that did not store it: the size comes from the object, which is gone.
    expect(await commitOne('tP20', 'exec-tP20', rec.id, true)).toEqual({ committed: 1, thumbnailSizeBytes: 0 });
    const [row] = await h.sql`SELECT size_bytes FROM images WHERE id = ${rec.id}`;
    expect(Number(row.size_bytes)).toBe(png.length);
    await waitFor(() => storedEventsOf('tP20').length === 1);
    expect(ImageStored.decode(storedEventsOf('tP20')[0].data)).toMatchObject({
      imageId: rec.id,
      sizeBytes: png.length,
      thumbnailSizeBytes: 0,
    });
    expect(existsSync(file(rec.objectKey))).toBe(true);
  });

  it('a pending PNG whose header is sound but whose pixels do not decode answers 400 and leaves no row, file or count', async () => {
    // The header (read without decoding) passes; the rendering then fails on the image data.
    const sound = await makeImage(300, 200, { color: '#a83' });
    const idat = sound.indexOf('IDAT');
    const corrupt = Buffer.from(sound);
    corrupt.fill(0x5a, idat + 8, corrupt.length - 16);
    await h.client.touchSession({ tenantId: 'tP17', sessionId: 's-exec-corrupt' }, h.principal('tP17'));
    const err = await h.client.storeImage(req('tP17', 'exec-corrupt', { data: corrupt }), h.principal('tP17')).catch((e) => e);
    expect(err).toMatchObject({ status: 400, body: { error: 'Invalid image data', details: ['the image could not be decoded'] } });
    expect(await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP17'`).toHaveLength(0);
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tP17' AND session_id = 's-exec-corrupt'`;
    expect(s.image_count).toBe(0);
    const dir = join(h.dataDir, 'objects', 'tenants', 'tP17');
    const files = existsSync(dir) ? readdirSync(dir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile()) : [];
    expect(files).toEqual([]);
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key LIKE 'tenants/tP17/%'`).toHaveLength(0);
  });

  it('with the reported image ids, commits those and discards the rest (a store whose answer was lost)', async () => {
    const told = await h.client.storeImage(req('tP6', 'exec-lost-answer'), h.principal('tP6'));
    const untold = await h.client.storeImage(req('tP6', 'exec-lost-answer'), h.principal('tP6'));
    const c = await h.client.commitExecutionImages(
      { tenantId: 'tP6', executionId: 'exec-lost-answer', imageIds: [told.id] },
      h.principal('tP6'),
    );
    expect(c.committed).toBe(1);
    const page = await h.client.listImages(ListImagesRequest.fromPartial({ limit: 50 }), h.principal('tP6'));
    expect(page.images.map((i) => i.id)).toEqual([told.id]);
    expect(existsSync(file(untold.objectKey))).toBe(false);
    expect(await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP6'`).toHaveLength(0);
    await waitFor(() => storedEventsOf('tP6').length === 1);
  });

  it('a second commit (the event consumer after generation, or the other way round) moves and bills nothing again', async () => {
    const rec = await h.client.storeImage(req('tP7', 'exec-twice'), h.principal('tP7'));
    const first = await h.client.commitExecutionImages({ tenantId: 'tP7', executionId: 'exec-twice', imageIds: [] }, h.principal('tP7'));
    const second = await h.client.commitExecutionImages(
      { tenantId: 'tP7', executionId: 'exec-twice', imageIds: [rec.id] },
      h.principal('tP7'),
    );
    expect([first.committed, second.committed]).toEqual([1, 0]);
    const page = await h.client.listImages(ListImagesRequest.fromPartial({ limit: 50 }), h.principal('tP7'));
    expect(page.images.map((i) => i.id)).toEqual([rec.id]);
    expect(existsSync(file(rec.objectKey))).toBe(true);
    await waitFor(() => storedEventsOf('tP7').length === 1);
  });

  it('a store into a full session schedules nothing and writes no file', async () => {
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count, is_active) VALUES ('tP8', 's-exec-full', 1000, false)`;
    const gcBefore = await h.sql`SELECT count(*)::int AS n FROM object_gc`;
    await expect(h.client.storeImage(req('tP8', 'exec-full'), h.principal('tP8'))).rejects.toMatchObject({
      status: 400,
      body: { error: 'Session image limit reached', details: { imageCount: 1000 } },
    });
    expect(await h.sql`SELECT count(*)::int AS n FROM object_gc`).toEqual(gcBefore);
    expect(existsSync(join(h.dataDir, 'objects', 'tenants', 'tP8'))).toBe(false);
    expect(await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP8'`).toHaveLength(0);
  });

  it('a pending store whose thumbnail cannot be written leaves no row, no file, no entry and the session count as it was', async () => {
    // A real filesystem fault: a file where the tenant's thumbnails directory must go (mkdir fails, as root too).
    mkdirSync(join(h.dataDir, 'objects', 'tenants', 'tP90'), { recursive: true });
    writeFileSync(join(h.dataDir, 'objects', 'tenants', 'tP90', 'thumbnails'), 'not a directory');
    await h.client.touchSession({ tenantId: 'tP90', sessionId: 's-exec-nothumb' }, h.principal('tP90'));
    await expect(h.client.storeImage(req('tP90', 'exec-nothumb'), h.principal('tP90'))).rejects.toMatchObject({ status: 500 });
    expect(await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP90'`).toHaveLength(0);
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tP90' AND session_id = 's-exec-nothumb'`;
    expect(s.image_count).toBe(0);
    expect(existsSync(join(h.dataDir, 'objects', 'tenants', 'tP90', 'images'))).toBe(true);
    expect(readdirSync(join(h.dataDir, 'objects', 'tenants', 'tP90', 'images'))).toEqual([]);
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key LIKE 'tenants/tP90/%'`).toHaveLength(0);
    // The commit of its execution finds nothing; a later store of the same execution is kept as usual.
    expect(
      (await h.client.commitExecutionImages({ tenantId: 'tP90', executionId: 'exec-nothumb', imageIds: [] }, h.principal('tP90')))
        .committed,
    ).toBe(0);
  });

  it('a pending store refused at the row lock (the session filled up meanwhile) writes no file', async () => {
    await h.sql`INSERT INTO sessions (tenant_id, session_id, image_count) VALUES ('tP91', 's-exec-race', 0)`;
    let locked!: () => void;
    const lockTaken = new Promise<void>((r) => (locked = r));
    const filling = h.sql.begin(async (tx) => {
      await tx`SELECT 1 FROM sessions WHERE tenant_id = 'tP91' AND session_id = 's-exec-race' FOR UPDATE`;
      locked();
      // The session fills up while the store waits for the row.
      await waitFor(async () => (await waitingForLock()) > 0, { message: 'the store waiting for the session row' });
      await tx`UPDATE sessions SET image_count = 1000 WHERE tenant_id = 'tP91' AND session_id = 's-exec-race'`;
    });
    await lockTaken;
    await expect(h.client.storeImage(req('tP91', 'exec-race'), h.principal('tP91'))).rejects.toMatchObject({
      status: 400,
      body: { error: 'Session image limit reached', details: { imageCount: 1000 } },
    });
    await filling;
    expect(existsSync(join(h.dataDir, 'objects', 'tenants', 'tP91'))).toBe(false);
    expect(await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP91'`).toHaveLength(0);
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key LIKE 'tenants/tP91/%'`).toHaveLength(0);
  });

  it('another tenant cannot commit them', async () => {
    await h.client.storeImage(req('tP2', 'exec-2'), h.principal('tP2'));
    const c = await h.client.commitExecutionImages({ tenantId: '', executionId: 'exec-2', imageIds: [] }, h.principal('tOther'));
    expect(c.committed).toBe(0);
    expect(await listed('tOther')).toBe(0);
  });

  it('are committed by a completed ExecutionFinished event and discarded (files too) by a failed one', async () => {
    const ok = await h.client.storeImage(req('tP3', 'exec-ok'), h.principal('tP3'));
    const bad1 = await h.client.storeImage(req('tP3', 'exec-bad'), h.principal('tP3'));
    const bad2 = await h.client.storeImage(req('tP3', 'exec-bad'), h.principal('tP3'));
    await finish('tP3', 'exec-ok', 'completed', [ok.id]);
    await finish('tP3', 'exec-bad', 'failed');
    await waitFor(async () => (await listed('tP3')) === 1 && !existsSync(file(bad2.objectKey)), { timeout: 10_000 });
    const page = await h.client.listImages(ListImagesRequest.fromPartial({ limit: 50 }), h.principal('tP3'));
    expect(page.images.map((i) => i.id)).toEqual([ok.id]);
    for (const b of [bad1, bad2]) {
      expect(existsSync(file(b.objectKey))).toBe(false);
      expect(existsSync(file(b.thumbnailKey))).toBe(false);
    }
    // The session's capacity reserved by the discarded images is given back.
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tP3' AND session_id = 's-exec-bad'`;
    expect(s.image_count).toBe(0);
    await waitFor(() => storedEventsOf('tP3').length === 1);
  });

  it('a pending row whose files never came (its process died between the row and the writes) goes with its failed execution', async () => {
    const rec = await h.client.storeImage(req('tP92', 'exec-crash'), h.principal('tP92'));
    // What a crash right after the row's statement leaves: the row, no files.
    rmSync(file(rec.objectKey));
    rmSync(file(rec.thumbnailKey));
    await finish('tP92', 'exec-crash', 'failed'); // the reaper fails the abandoned execution
    // The row goes in the discard's transaction; the files and then their gc entries right after it.
    await waitFor(
      async () =>
        (await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP92'`).length === 0 &&
        (await h.sql`SELECT 1 FROM object_gc WHERE object_key LIKE 'tenants/tP92/%'`).length === 0,
      { timeout: 10_000 },
    );
    const [s] = await h.sql`SELECT image_count FROM sessions WHERE tenant_id = 'tP92' AND session_id = 's-exec-crash'`;
    expect(s.image_count).toBe(0);
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key LIKE 'tenants/tP92/%'`).toHaveLength(0);
    expect(await listed('tP92')).toBe(0);
  });

  it('a completed event lists exactly the images it names, before or without the commit call; the others are discarded', async () => {
    // The fault case: the store answer of `lost` never reached generation (the library died after its commit), so
    // the execution reported only `told`; its ExecutionFinished may arrive before generation's commit call.
    const told = await h.client.storeImage(req('tP9', 'exec-9'), h.principal('tP9'));
    const lost = await h.client.storeImage(req('tP9', 'exec-9'), h.principal('tP9'));
    await finish('tP9', 'exec-9', 'completed', [told.id]);
    await waitFor(async () => (await listed('tP9')) === 1 && !existsSync(file(lost.objectKey)), { timeout: 10_000 });
    const page = await h.client.listImages(ListImagesRequest.fromPartial({ limit: 50 }), h.principal('tP9'));
    expect(page.images.map((i) => i.id)).toEqual([told.id]);
    expect(await h.sql`SELECT 1 FROM pending_images WHERE tenant_id = 'tP9'`).toHaveLength(0);
    // Generation's own commit call, coming second, moves nothing more.
    const again = await h.client.commitExecutionImages({ tenantId: '', executionId: 'exec-9', imageIds: [told.id] }, h.principal('tP9'));
    expect(again.committed).toBe(0);
    await waitFor(() => storedEventsOf('tP9').length === 1);
  });

  it('a completed event that names no image discards them all; one written before image ids existed commits them all', async () => {
    const none = await h.client.storeImage(req('tP10', 'exec-none'), h.principal('tP10'));
    const legacy = await h.client.storeImage(req('tP10', 'exec-legacy'), h.principal('tP10'));
    await finish('tP10', 'exec-none', 'completed', []);
    await finish('tP10', 'exec-legacy', 'completed', [], 1);
    await waitFor(async () => (await listed('tP10')) === 1 && !existsSync(file(none.objectKey)), { timeout: 10_000 });
    const page = await h.client.listImages(ListImagesRequest.fromPartial({ limit: 50 }), h.principal('tP10'));
    expect(page.images.map((i) => i.id)).toEqual([legacy.id]);
  });

  it("the consumer of a completed event leaves the database alone when this process's commit call moved its images", async () => {
    const rec = await h.client.storeImage(req('tP11', 'exec-own'), h.principal('tP11'));
    const own = await h.client.commitExecutionImages({ tenantId: '', executionId: 'exec-own', imageIds: [rec.id] }, h.principal('tP11'));
    expect(own.committed).toBe(1);
    const consumed = async () => {
      const { body } = await metricsText();
      return body
        .split('\n')
        .filter(
          (l) =>
            l.startsWith('imagegen_events_consumed_total') &&
            l.includes('durable="library-execution-outcomes"') &&
            l.includes('outcome="ok"'),
        )
        .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    };
    const before = await consumed();
    // With pending_images locked, any query of the consumer would wait: the event is handled without one.
    await h.sql.begin(async (tx) => {
      await tx`LOCK TABLE pending_images IN ACCESS EXCLUSIVE MODE`;
      await finish('tP11', 'exec-own', 'completed', [rec.id]);
      await waitFor(async () => (await consumed()) > before);
    });
    expect(await listed('tP11')).toBe(1);
  });

  it('a commit call of this process that failed leaves the consumer its check', async () => {
    const down = createDb('postgres://postgres@127.0.0.1:1/none', { schema: 'library', max: 1 });
    try {
      const deps = { sql: down, storage: h.ctx.storage, config: h.ctx.config };
      await expect(commitExecutionImages(deps, 'tP12', 'exec-broken', [1])).rejects.toBeDefined();
      expect(await committedHere('exec-broken')).toBe(false);
    } finally {
      await down.end();
    }
  });

  it('with no outcome after the maximum age are discarded', async () => {
    const rec = await h.client.storeImage(req('tP4', 'exec-lost'), h.principal('tP4'));
    await h.sql`UPDATE pending_images SET created_at = now() - interval '2 hours' WHERE id = ${rec.id}`;
    const deps = { sql: h.sql, storage: h.ctx.storage, config: h.ctx.config };
    expect(await discardStalePending(deps, 3_600_000)).toBe(1);
    expect(existsSync(file(rec.objectKey))).toBe(false);
  });

  it('a pending store needs an execution id', async () => {
    await expect(h.client.storeImage(req('tP5', ''), h.principal('tP5'))).rejects.toMatchObject({ status: 400 });
  });
});

describe('object sweeper', () => {
  it('removes files whose store never committed (a crash after the file writes), once due', async () => {
    const keys = ['tenants/tG/images/crashed.png', 'tenants/tG/thumbnails/crashed.webp'];
    // What storeImage does before a crash: schedule the keys, then write the files; no row ever comes.
    await scheduleRemoval(h.sql, keys, 60_000);
    for (const k of keys) {
      mkdirSync(dirname(file(k)), { recursive: true });
      writeFileSync(file(k), 'x');
    }
    const deps = { sql: h.sql, storage: h.ctx.storage };
    await sweepObjects(deps);
    expect(keys.every((k) => existsSync(file(k)))).toBe(true); // not due yet
    await h.sql`UPDATE object_gc SET due_at = now() - interval '1 second' WHERE object_key = ANY(${keys}::text[])`;
    expect(await sweepObjects(deps)).toBe(2);
    expect(keys.some((k) => existsSync(file(k)))).toBe(false);
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key = ANY(${keys}::text[])`).toHaveLength(0);
  });

  it('leaves no entry behind for a stored image; a deleted image leaves its files until the grace ends, then none', async () => {
    const rec = await h.client.storeImage(req('tG2', '', { pending: false }), h.principal('tG2'));
    const keys = [rec.objectKey, rec.thumbnailKey];
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key = ANY(${keys}::text[])`).toHaveLength(0);
    await h.client.deleteImage({ imageId: rec.id }, h.principal('tG2'));
    const deps = { sql: h.sql, storage: h.ctx.storage };
    await sweepObjects(deps);
    expect(keys.every((k) => existsSync(file(k)))).toBe(true); // OBJECT_DELETE_GRACE (7 days) not over
    await h.sql`UPDATE object_gc SET due_at = now() - interval '1 second' WHERE object_key = ANY(${keys}::text[])`;
    expect(await sweepObjects(deps)).toBe(2);
    expect(keys.some((k) => existsSync(file(k)))).toBe(false);
    expect(await h.sql`SELECT 1 FROM object_gc WHERE object_key = ANY(${keys}::text[])`).toHaveLength(0);
  });
});
