/**
 * Issue 40, item 3: a backup restores. A pg_dump taken while images are being generated, images deleted after
 * it, the dump restored into a fresh database beside the same object store, and the stack started on it:
 * every image the restored database lists is served, file and thumbnail byte-identical to what was written
 * (the deleted ones too: their files stayed for OBJECT_DELETE_GRACE), and usage equals the restored rows.
 * The procedures are the README's ("Backups"): for the distributed shape pg_dump, then the bucket; for the
 * all-in-one `pnpm backup` (services/stack/src/backup.ts), online, whose folder is the restored data folder.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createTestDatabase } from '@imagegen/platform';
import { backupDataDir } from '@imagegen/stack/backup.ts';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);
const sha = (b: ArrayBuffer) => createHash('sha256').update(Buffer.from(b)).digest('hex');

interface Written {
  id: number;
  fullUrl: string;
  thumbnailUrl: string;
  sizeBytes: number;
  file: string;
  thumbnail: string;
}

const stacks: TestStack[] = [];
const cleanups: (() => Promise<void>)[] = [];
const backupDir = mkdtempSync(join(tmpdir(), 'imagegen-backup-'));
chmodSync(backupDir, 0o755); // as root, the embedded PostgreSQL runs as its own user, which must reach the restored folder

afterAll(async () => {
  // Restored stacks first, then the originals (their data folder is the object store the restored ones used).
  for (const s of stacks.reverse()) await s.stop();
  for (const c of cleanups) await c();
  rmSync(backupDir, { recursive: true, force: true });
});

async function start(env: Record<string, string>): Promise<TestStack> {
  const s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1', ...env } });
  stacks.push(s);
  return s;
}

/** One generation of n images; each image's file and thumbnail read back at once (what was written). */
async function generate(a: TestStack, t: TestTenant, n: number): Promise<Written[]> {
  const r = await a.api('/api/images', { key: t.liveKey, body: { prompt: `a backup under load ${Math.random()}`, n } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return Promise.all(
    (r.body.data.images as { record_id: number; full_url: string; thumbnail_url: string; size_bytes: number }[]).map(async (img) => {
      const [file, thumb] = await Promise.all([fetch(img.full_url), fetch(img.thumbnail_url)]);
      expect([file.status, thumb.status]).toEqual([200, 200]);
      return {
        id: img.record_id,
        fullUrl: img.full_url,
        thumbnailUrl: img.thumbnail_url,
        sizeBytes: img.size_bytes,
        file: sha(await file.arrayBuffer()),
        thumbnail: sha(await thumb.arrayBuffer()),
      };
    }),
  );
}

/**
 * Images answered before the backup, a backup taken while two clients generate, more images and deletes after
 * it (those deleted are not served by the running stack), then `restore()` starts a stack on the backup: it
 * lists every image answered before the backup and only written ones, each served byte-identical, the deleted
 * ones too; usage (the rolling 30 days) equals the restored rows, counting the restored images' events once.
 */
async function backupUnderLoadThenRestore(
  a: TestStack,
  backup: () => Promise<void>,
  restore: () => Promise<TestStack>,
): Promise<{ listed: number; written: number; deletedBack: number }> {
  const t = await a.createTenant();
  const written = new Map<number, Written>();
  const before = await generate(a, t, 4); // answered before the backup: the restored database must list them
  for (const w of before) written.set(w.id, w);

  let loading = true;
  const load = [1, 2].map(async () => {
    while (loading) for (const w of await generate(a, t, 2)) written.set(w.id, w);
  });
  await waitFor(() => written.size >= 8);
  await backup();
  await waitFor(() => written.size >= 20); // more images after the backup: the restored database lacks these
  loading = false;
  await Promise.all(load);

  // Deletes after the backup: gone from the running stack at once (not served), kept in storage for the grace.
  const deleted = [...before.slice(0, 2), ...[...written.values()].slice(-2)];
  for (const d of deleted) expect((await a.api(`/api/images/${d.id}`, { key: t.liveKey, method: 'DELETE' })).status).toBe(204);
  for (const d of deleted) expect((await fetch(d.fullUrl)).status).toBe(404);

  const b = await restore();
  const listed: { id: number; fullUrl: string; thumbnailUrl: string; sizeBytes: number }[] = [];
  for (let cursor: string | null = null, first = true; first || cursor; first = false) {
    const page = await b.api(`/api/images?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key: t.liveKey });
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    listed.push(...page.body.data);
    cursor = page.body.pagination.nextCursor;
  }
  const ids = new Set(listed.map((i) => i.id));
  for (const w of before) expect(ids.has(w.id), `image ${w.id} answered before the backup`).toBe(true);
  expect(listed.length).toBeLessThan(written.size); // the images made after the backup are not in it
  for (const img of listed) {
    const w = written.get(img.id);
    expect(w, `listed image ${img.id} was written`).toBeDefined();
    const [file, thumb] = await Promise.all([fetch(img.fullUrl), fetch(img.thumbnailUrl)]);
    expect([file.status, thumb.status], `image ${img.id}`).toEqual([200, 200]);
    expect(sha(await file.arrayBuffer())).toBe(w?.file);
    expect(sha(await thumb.arrayBuffer())).toBe(w?.thumbnail);
  }
  const deletedBack = listed.filter((i) => deleted.some((d) => d.id === i.id)).length;
  expect(deletedBack).toBeGreaterThanOrEqual(2);

  // A new image afterwards is the marker that the relay has passed every event before it.
  const marker = await b.api('/api/images', { key: t.liveKey, body: { prompt: 'after the restore' } });
  expect(marker.status, JSON.stringify(marker.body)).toBe(200);
  const expected = {
    images: listed.length + 1,
    bytes: listed.reduce((sum, i) => sum + i.sizeBytes, 0) + (marker.body.data.images[0].size_bytes as number),
  };
  let usage: { images: number; bytes: number } | undefined;
  // Outbox rows a writer was publishing itself when the backup was taken are left to it for DIRECT_PUBLISH_GRACE_MS
  // (10 s) after they were written, then the restored stack's relay publishes them: a bound, not a speed.
  await waitFor(
    async () => {
      usage = (await b.api('/api/usage', { key: t.liveKey })).body.data.recent;
      return usage?.images === expected.images;
    },
    { timeout: 60_000, message: 'usage (the rolling 30 days) to count the restored rows and the marker' },
  ).catch(() => undefined); // the assertion below shows both figures
  expect(usage).toEqual(expected);
  return { listed: listed.length, written: written.size, deletedBack };
}

describe('a backup taken under write load, restored beside the same object store', () => {
  it('distributed procedure: pg_dump, restored into a fresh database, the stack started on it', async () => {
    const a = await start({});
    const dump = join(backupDir, 'imagegen.dump');
    const restored = await createTestDatabase(undefined, 'restored');
    cleanups.push(restored.drop);
    await backupUnderLoadThenRestore(
      a,
      async () => {
        await run('pg_dump', ['--format=custom', '--file', dump, a.env.DATABASE_URL]);
      },
      async () => {
        await run('pg_restore', ['--no-owner', '--exit-on-error', '--dbname', restored.url, dump]);
        await a.stack.stop();
        // Secrets travel with a backup (README, "Backups"): the same credentials key and admin token.
        const { CREDENTIALS_KEY, ADMIN_TOKEN, EVENTS_PREFIX, DATA_DIR } = a.env;
        return start({ DATABASE_URL: restored.url, DATA_DIR, CREDENTIALS_KEY, ADMIN_TOKEN, EVENTS_PREFIX });
      },
    );
  });

  it('all-in-one: pnpm backup of the data folder while it serves (embedded PostgreSQL), started as the data folder', async () => {
    const a = await start({ DATABASE_URL: '' });
    const folder = join(backupDir, 'data');
    await backupUnderLoadThenRestore(
      a,
      async () => {
        const r = await backupDataDir(a.env.DATA_DIR, folder);
        expect(r.stopLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
        expect(readdirSync(join(folder, 'pg'))).toContain('backup_label');
      },
      async () => {
        await a.stack.stop();
        const { CREDENTIALS_KEY, ADMIN_TOKEN, EVENTS_PREFIX } = a.env;
        return start({ DATABASE_URL: '', DATA_DIR: folder, CREDENTIALS_KEY, ADMIN_TOKEN, EVENTS_PREFIX });
      },
    );
  });
});
