import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDb } from '@imagegen/platform';
import { startTestStack } from '../support/stack.js';
import { seedListsAtScale, seedScale } from './scale-seed.js';

/**
 * `pnpm bench tenant-data` (issue 40, item 4): a tenant's export and purge at size. Two tenants are seeded, one
 * with SMALL images and one with LARGE (default 1,000 and 10,000; BENCH_EXPORT_IMAGES sets the large one), each
 * image with a real original (20 KB, incompressible) and thumbnail (2 KB) on the filesystem storage, and the
 * rows of seedListsAtScale (executions with logs, characters, scenes, products, presets, usage months and hours);
 * BENCH_NEIGHBOUR_ROWS (default 0) adds other tenants' image rows, for the plans at a million rows.
 * Measured: each export's time (POST to completed), the process's RSS (sampled every 20 ms, the whole stack
 * runs in this process) before and at its peak during the export, and the ZIP's size; then the large tenant's
 * purge: its time and the rows and objects it removed. The export's memory is flat when the peak over the
 * baseline is the same for both sizes.
 */

const ORIGINAL_BYTES = 20_000;
const THUMB_BYTES = 2_000;

function writeObjects(dataDir: string, tenantId: string, count: number): number {
  const root = join(dataDir, 'objects', 'tenants', tenantId);
  mkdirSync(join(root, 'images'), { recursive: true });
  mkdirSync(join(root, 'thumbnails'), { recursive: true });
  const original = randomBytes(ORIGINAL_BYTES);
  const thumb = randomBytes(THUMB_BYTES);
  for (let i = 0; i < count; i++) {
    // Distinct bytes per object (the first 8 bytes carry the number), incompressible like real images.
    original.writeUInt32BE(i, 0);
    thumb.writeUInt32BE(i, 0);
    writeFileSync(join(root, 'images', `s-${i}.png`), original);
    writeFileSync(join(root, 'thumbnails', `s-${i}.webp`), thumb);
  }
  return count * (ORIGINAL_BYTES + THUMB_BYTES);
}

export async function benchTenantData(): Promise<void> {
  const small = 1_000;
  const large = Number(process.env.BENCH_EXPORT_IMAGES ?? 10_000);
  const neighbours = Number(process.env.BENCH_NEIGHBOUR_ROWS ?? 0);
  const s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1', LOG_LEVEL: 'warn' } });
  try {
    const a = await s.createTenant();
    const b = await s.createTenant();
    const seedStart = performance.now();
    await seedScale(s.env.DATABASE_URL as string, {
      tenants: [
        { id: a.tenantId, count: small },
        { id: b.tenantId, count: large },
      ],
      others: neighbours,
      otherTenants: 10,
    });
    await seedListsAtScale(s.env.DATABASE_URL as string, [
      { id: a.tenantId, count: small },
      { id: b.tenantId, count: large },
    ]);
    const bytes = writeObjects(s.env.DATA_DIR as string, a.tenantId, small) + writeObjects(s.env.DATA_DIR as string, b.tenantId, large);
    console.log(
      `tenant-data: seeded ${small} + ${large} images (${(bytes / 1e6).toFixed(0)} MB of objects) and ${neighbours} neighbour rows in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`,
    );

    const exportOf = async (t: typeof a, images: number) => {
      global.gc?.();
      await new Promise((r) => setTimeout(r, 500));
      const baseline = process.memoryUsage().rss;
      let peak = baseline;
      const sampler = setInterval(() => {
        peak = Math.max(peak, process.memoryUsage().rss);
      }, 20);
      const t0 = performance.now();
      const start = await s.api('/api/exports', { key: t.liveKey, method: 'POST' });
      if (start.status !== 202) throw new Error(`export: ${start.status} ${JSON.stringify(start.body)}`);
      let e = start.body.data;
      while (e.status === 'queued' || e.status === 'running') {
        await new Promise((r) => setTimeout(r, 200));
        e = (await s.api(`/api/exports/${e.exportId}`, { key: t.liveKey })).body.data;
      }
      const ms = performance.now() - t0;
      clearInterval(sampler);
      if (e.status !== 'completed') throw new Error(`export ended ${e.status}: ${e.error}`);
      const mb = (n: number) => (n / 1048576).toFixed(0);
      console.log(
        `tenant-data: export of ${images} images: ${(ms / 1000).toFixed(1)} s, ZIP ${mb(e.sizeBytes)} MiB (${e.itemsTotal} files), ` +
          `RSS ${mb(baseline)} MiB before, peak ${mb(peak)} MiB (+${mb(peak - baseline)} MiB)`,
      );
    };
    await exportOf(a, small);
    await exportOf(b, large);

    if (neighbours > 0) {
      const sql = createDb(s.env.DATABASE_URL as string, { schema: 'library', max: 1 });
      try {
        for (const q of [
          `EXPLAIN SELECT to_jsonb(t) AS row FROM library.images t WHERE t.tenant_id = '${b.tenantId}' AND (t.created_at, t.id) < (now(), 99999999) ORDER BY t.created_at DESC, t.id DESC LIMIT 500`,
          `EXPLAIN SELECT id FROM library.images WHERE tenant_id = '${b.tenantId}' ORDER BY created_at DESC, id DESC LIMIT 500`,
          // The purge: the library's page of images to remove, and the generic batched delete of any tenant table.
          `EXPLAIN DELETE FROM library.images WHERE tenant_id = '${b.tenantId}' AND id = ANY('{1,2,3}'::bigint[])`,
          `EXPLAIN DELETE FROM library.images WHERE ctid = ANY(ARRAY(SELECT ctid FROM library.images WHERE tenant_id = '${b.tenantId}' LIMIT 5000))`,
          `EXPLAIN SELECT object_key FROM library.object_gc WHERE (object_key COLLATE "C") >= 'tenants/${b.tenantId}/' AND (object_key COLLATE "C") < 'tenants/${b.tenantId}0' ORDER BY object_key COLLATE "C" LIMIT 500`,
        ]) {
          const plan = (await sql.unsafe(q)) as unknown as { 'QUERY PLAN': string }[];
          console.log(`tenant-data: ${q.slice(8, 90)}...\n${plan.map((p) => `    ${p['QUERY PLAN']}`).join('\n')}`);
        }
      } finally {
        await sql.end();
      }
    }

    const off = await s.api(`/admin/tenants/${b.tenantId}`, { admin: true, method: 'PATCH', body: { is_active: false } });
    if (off.status !== 200) throw new Error(`deactivate: ${off.status}`);
    const login = await s.api('/admin/auth/login', { body: { email: s.adminEmail, password: s.adminPassword } });
    const t0 = performance.now();
    const purge = await s.api(`/admin/tenants/${b.tenantId}/purge`, {
      headers: { authorization: `Bearer ${login.body.data.token}` },
      body: { confirm: b.tenantId },
    });
    const ms = performance.now() - t0;
    if (purge.status !== 200) throw new Error(`purge: ${purge.status} ${JSON.stringify(purge.body)}`);
    const p = purge.body.data;
    const rows = Object.values(p.rowsRemoved as Record<string, number>).reduce((x, y) => x + y, 0);
    console.log(
      `tenant-data: purge of ${large} images: ${(ms / 1000).toFixed(1)} s, ${rows} rows and ${p.objectsRemoved} objects removed, ${p.redisKeysRemoved} Redis keys`,
    );
    console.log(`tenant-data: rows removed per table: ${JSON.stringify(p.rowsRemoved)}`);
  } finally {
    await s.stop();
  }
}
