import { request } from 'node:http';
import type { ImageRecord } from '@imagegen/contracts/library/v1/library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { librarySeeder } from './images-seed.js';
import { noisePng } from './usage-support.js';

/**
 * Issue 13, item 1: a ZIP download whose files vanish while it streams. A client asks for 100 images, stops
 * reading after the headers, 20 of them are deleted, and the client reads on. Before the fix, yazl's 'error'
 * (the entry's file is gone) had no listener: thrown from the open() promise's handler, an unhandled rejection
 * that ended the whole all-in-one process (its crash handler exits), and the download hung.
 * Now that download ends (the response is cut short of its Content-Length) and the process serves on.
 * Deleted files stay in storage for OBJECT_DELETE_GRACE: they vanish at once only without a grace (as here),
 * or when the sweeper removes them while a download of stale ids runs.
 */

let s: TestStack;
let t: TestTenant;
const images: ImageRecord[] = [];
const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);

beforeAll(async () => {
  // The stack runs in this process: record what would have ended it (vitest keeps the worker alive).
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  s = await startTestStack({ env: { OBJECT_DELETE_GRACE: '0' } });
  t = await s.createTenant();
  const seed = librarySeeder(s);
  // ~190 KB of incompressible pixels each: the 19 MB archive cannot sit in socket buffers while the client waits.
  for (let i = 0; i < 100; i += 10) {
    images.push(
      ...(await Promise.all(
        Array.from({ length: 10 }, (_, k) => seed.store(t.tenantId, { prompt: `zip race ${i + k}`, data: noisePng(256, 256) })),
      )),
    );
  }
  seed.close();
}, 120_000);

afterAll(async () => {
  await s?.stop();
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUncaught);
});

interface Download {
  status: number;
  contentLength: number;
  received: number;
  complete: boolean;
  /** The body neither ended nor broke within 20 s of the resume (the client gave up). */
  stalled: boolean;
}

/** POST /api/images/download read by a slow client: `whilePaused` runs after the headers, before any body is read. */
function slowDownload(ids: number[], whilePaused: () => Promise<void>): Promise<Download> {
  const url = new URL('/api/images/download', s.baseUrl);
  const body = JSON.stringify({ imageIds: ids });
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'x-api-key': t.liveKey, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.pause();
        let received = 0;
        let stalled = false;
        let timer: NodeJS.Timeout | undefined;
        const done = () => {
          clearTimeout(timer);
          resolve({
            status: res.statusCode ?? 0,
            contentLength: Number(res.headers['content-length']),
            received,
            complete: res.complete,
            stalled,
          });
        };
        res.on('data', (c: Buffer) => {
          received += c.length;
        });
        res.once('error', done);
        res.once('close', done);
        whilePaused().then(
          () => {
            res.resume();
            timer = setTimeout(() => {
              stalled = true;
              req.destroy();
            }, 20_000);
          },
          (err) => {
            req.destroy();
            reject(err);
          },
        );
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

describe('POST /api/images/download while its images are deleted', () => {
  it('ends that download, never the process', async () => {
    const ids = images.map((i) => i.id);
    const doomed = ids.slice(-20);
    const dl = await slowDownload(ids, async () => {
      const del = await s.api('/api/images/delete-bulk', { key: t.liveKey, body: { ids: doomed } });
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      expect(del.body.data.summary.succeeded).toBe(20);
      // The originals are gone from storage before the client reads on.
      for (const img of images.slice(-20)) expect((await fetch(img.fullUrl)).status).toBe(404);
    });
    expect(dl.status).toBe(200);
    // Nothing escaped to the process (in the all-in-one runner, its crash handler would have exited).
    expect(uncaught.map((e) => String((e as Error)?.stack ?? e))).toEqual([]);
    expect(dl.stalled, 'the download neither ended nor broke').toBe(false);
    expect(dl.contentLength).toBeGreaterThan(15_000_000);
    // Cut short: the client can tell the archive is incomplete.
    expect(dl.complete).toBe(false);
    expect(dl.received).toBeLessThan(dl.contentLength);

    // The process lives and serves, downloads included.
    const list = await s.api('/api/images?limit=5', { key: t.liveKey });
    expect(list.status).toBe(200);
    expect(list.body.pagination.total).toBe(80);
    const again = await fetch(`${s.baseUrl}/api/images/download`, {
      method: 'POST',
      headers: { 'x-api-key': t.liveKey, 'content-type': 'application/json' },
      body: JSON.stringify({ imageIds: ids.slice(0, 80) }),
    });
    expect(again.status).toBe(200);
    const zip = Buffer.from(await again.arrayBuffer());
    expect(zip.length).toBe(Number(again.headers.get('content-length')));
  }, 60_000);
});
