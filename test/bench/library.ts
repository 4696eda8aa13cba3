import { createDb, loadConfig } from '@imagegen/platform';
import { listImagesJson } from '../../services/library/src/images/list-query.js';
import { startTestStack } from '../support/stack.js';
import { fmt, load, machineLoad, percentile } from './util.js';

/**
 * Issue 4 benchmark, list part: p50/p99 of `GET /api/images?limit=20` (gateway -> auth -> library gRPC ->
 * PostgreSQL) with 10,000 images in one tenant, 20 connections. Target: p99 < 25 ms.
 *
 * Seeding: one direct bulk INSERT ... SELECT generate_series into the library schema of the stack's test
 * database (10 sessions of 1,000 images, the session limit, created_at spread over the last 10,000 minutes),
 * then ANALYZE. StoreImage would cost 10,000 sharp decodes + thumbnails + file writes for rows the list
 * never opens; the rows are the same shape (the tenant_stats triggers count bulk inserts too).
 * Baseline, in the same run: the library's own page query (listImagesJson: SQL + rendered JSON) called
 * directly by the same number of concurrent callers on a pool of the library's size, no HTTP, auth or
 * gRPC. The ratio API/baseline is what the whole request path keeps of the database's throughput.
 * BENCH_SECONDS (default 10), BENCH_LIST_IMAGES (default 10000), BENCH_LIST_CONNECTIONS (default 20).
 */
export async function benchLibrary(): Promise<void> {
  const durationSec = Number(process.env.BENCH_SECONDS ?? 10);
  const count = Number(process.env.BENCH_LIST_IMAGES ?? 10_000);
  const connections = Number(process.env.BENCH_LIST_CONNECTIONS ?? 20);
  const prev = process.env.RATE_LIMIT_DISABLED;
  process.env.RATE_LIMIT_DISABLED = '1';
  const stack = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  try {
    const tenant = await stack.createTenant({ rate_limit_per_minute: 100_000_000 });
    const t = tenant.tenantId;
    const seeded = performance.now();
    await seedImages(stack.env.DATABASE_URL, t, count);
    const seedMs = performance.now() - seeded;

    const url = `${stack.baseUrl}/api/images?limit=20`;
    const headers = { 'x-api-key': tenant.liveKey };
    const check = await fetch(url, { headers });
    const body = (await check.json()) as { data: unknown[]; pagination: { total: number } };
    if (check.status !== 200 || body.data.length !== 20 || body.pagination.total !== count) {
      throw new Error(`list sanity check failed: ${check.status} ${JSON.stringify(body).slice(0, 300)}`);
    }
    await load(url, { connections, durationSec: 2, headers }); // warm-up (JIT, pools, plan cache)
    const machine = machineLoad();
    const r = await load(url, { connections, durationSec, headers });
    const base = await directQueryLoad(stack.env.DATABASE_URL, t, connections, durationSec);
    console.log(`\n== library: GET /api/images?limit=20 with ${count} images in the tenant (${connections} connections) ==`);
    console.log(`seeded by bulk INSERT in ${fmt(seedMs, 0)} ms; ${machine}`);
    console.log(
      `GET /api/images?limit=20         ${fmt(r.reqPerSec, 0)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms (target < 25 ms)  non-2xx ${r.non2xx}  errors ${r.errors}`,
    );
    console.log(
      `baseline: page query alone      ${fmt(base.perSec, 0)} calls/s  p50 ${fmt(base.p50)} ms  p99 ${fmt(base.p99)} ms  (pool ${base.pool})`,
    );
    console.log(`ratio API/baseline               ${fmt((100 * r.reqPerSec) / base.perSec, 0)}% of the query's throughput`);
  } finally {
    await stack.stop();
    if (prev === undefined) delete process.env.RATE_LIMIT_DISABLED;
    else process.env.RATE_LIMIT_DISABLED = prev;
  }
}

/**
 * `callers` concurrent loops calling listImagesJson (the library's page query) for `durationSec` seconds on
 * a pool as large as the library's (DB_POOL_MAX): the floor the API is measured against.
 */
async function directQueryLoad(databaseUrl: string, tenantId: string, callers: number, durationSec: number) {
  const pool = loadConfig().dbPoolMax;
  const sql = createDb(databaseUrl, { schema: 'library', max: pool });
  const run = async (seconds: number, latencies?: number[]) => {
    const end = performance.now() + seconds * 1000;
    let calls = 0;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          const page = await listImagesJson(sql, tenantId, {}, { limit: 20 }, '/files/');
          if (!page.json || page.total === 0) throw new Error('baseline page query returned no page');
          latencies?.push(performance.now() - t0);
          calls++;
        }
      }),
    );
    return calls;
  };
  try {
    await run(2); // warm-up
    const latencies: number[] = [];
    const calls = await run(durationSec, latencies);
    latencies.sort((a, b) => a - b);
    return { perSec: calls / durationSec, p50: percentile(latencies, 50), p99: percentile(latencies, 99), pool };
  } finally {
    await sql.end();
  }
}

/**
 * Bulk-inserts `count` image rows (sessions of 1,000, the session limit) for `tenantId` into the library
 * schema of `databaseUrl`, newest last, then ANALYZE. No files are written: listing never opens them.
 */
export async function seedImages(databaseUrl: string, tenantId: string, count: number): Promise<void> {
  const t = tenantId;
  const sql = createDb(databaseUrl, { schema: 'library', max: 1 });
  try {
    const sessions = Math.ceil(count / 1000);
    await sql.begin(async (tx) => {
      await tx`
        INSERT INTO sessions (tenant_id, session_id, is_active, image_count, created_at, last_activity_at)
        SELECT ${t}, 'bench-session-' || s, false, LEAST(1000, ${count} - s * 1000), now(), now()
        FROM generate_series(0, ${sessions - 1}) s`;
      await tx`
        INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, thumbnail_mime_type,
          width, height, size_bytes, thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id,
          resolution_tier, is_reference, key_type, tokens, created_at)
        SELECT ${t}, 'bench-session-' || (i / 1000),
          'tenants/' || ${t} || '/images/bench-' || i || '.png',
          'tenants/' || ${t} || '/thumbnails/bench-' || i || '.webp',
          'image/png', 'png', 'image/webp', 1024, 1024, 1200000 + i, 9000 + (i % 500),
          'a benchmark picture number ' || i || ' of a lighthouse at dusk', CASE WHEN i % 7 = 0 THEN 'blurry' END,
          'generate', '1:1', 'provA-flash-lite-image', '1k', false, 'live', 1290,
          now() - make_interval(mins => ${count} - i)
        FROM generate_series(0, ${count - 1}) i`;
    });
    // VACUUM as well: a table in steady state has been vacuumed, and autovacuum would otherwise visit the
    // 10,000 new rows during the measurement.
    await sql`VACUUM (ANALYZE) images`;
    await sql`VACUUM (ANALYZE) sessions`;
  } finally {
    await sql.end();
  }
}
