import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { createDb } from '@imagegen/platform';
import Fastify from 'fastify';
import { listImagesJson } from '../../services/library/src/images/list-query.js';
import { startTestStack } from '../support/stack.js';
import { fmt, type LoadResult, load, machineLoad, median, percentile } from './util.js';

/**
 * Issue 4 benchmark, list part: p50/p99 of `GET /api/images?limit=20` (gateway -> auth -> library gRPC ->
 * PostgreSQL) with 10,000 images in one tenant, 20 connections. Target: p99 < 25 ms.
 *
 * Seeding: one direct bulk INSERT ... SELECT generate_series into the library schema of the stack's test
 * database (10 sessions of 1,000 images, the session limit, created_at spread over the last 10,000 minutes),
 * then ANALYZE. StoreImage would cost 10,000 sharp decodes + thumbnails + file writes for rows the list
 * never opens; the rows are the same shape (the tenant_stats triggers count bulk inserts too).
 *
 * Baselines, in the same run and at the same number of connections (issue 36 item 7): a bare fastify
 * hello-world and the authenticated `GET /api/profile` (gateway -> tenancy, no SQL per request) of the same
 * process, loaded in alternation with the list, BENCH_ROUNDS (default 3) rounds of BENCH_SECONDS (default 10)
 * each; medians and every round are printed. The machine is shared: a list p99 means something only next to
 * what a hello-world and the profile route got in the same minutes. During the list's rounds the bench also
 * counts the process's GC pauses (by kind, from perf_hooks), its event loop's delay and its CPU per request.
 * Then the library's own page query (listImagesJson: SQL + rendered JSON, called as the library's handler
 * calls it) by the same number of concurrent callers on a pool of the library's size (the stack's
 * DB_POOL_MAX), no HTTP, auth or gRPC: the ratio API/baseline is what the request path keeps of it.
 * BENCH_SECONDS (default 10), BENCH_ROUNDS (default 3), BENCH_LIST_IMAGES (default 10000),
 * BENCH_LIST_CONNECTIONS (default 20).
 */
export async function benchLibrary(): Promise<void> {
  const durationSec = Number(process.env.BENCH_SECONDS ?? 10);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const count = Number(process.env.BENCH_LIST_IMAGES ?? 10_000);
  const connections = Number(process.env.BENCH_LIST_CONNECTIONS ?? 20);
  const prev = process.env.RATE_LIMIT_DISABLED;
  process.env.RATE_LIMIT_DISABLED = '1';
  const bare = Fastify();
  bare.get('/', async () => ({ hello: 'world' }));
  const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
  const stack = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  try {
    const tenant = await stack.createTenant({ rate_limit_per_minute: 100_000_000 });
    const t = tenant.tenantId;
    const seeded = performance.now();
    await seedImages(stack.env.DATABASE_URL, t, count);
    const seedMs = performance.now() - seeded;

    const url = `${stack.baseUrl}/api/images?limit=20`;
    const profileUrl = `${stack.baseUrl}/api/profile`;
    const headers = { 'x-api-key': tenant.liveKey };
    const check = await fetch(url, { headers });
    const body = (await check.json()) as { data: unknown[]; pagination: { total: number } };
    if (check.status !== 200 || body.data.length !== 20 || body.pagination.total !== count) {
      throw new Error(`list sanity check failed: ${check.status} ${JSON.stringify(body).slice(0, 300)}`);
    }
    // Warm-up (JIT, pools, plan cache).
    await load(bareUrl, { connections, durationSec: 2 });
    await load(profileUrl, { connections, durationSec: 2, headers });
    await load(url, { connections, durationSec: 2, headers });
    const b: LoadResult[] = [];
    const p: LoadResult[] = [];
    const l: (LoadResult & Watched)[] = [];
    const loads: string[] = [];
    for (let i = 0; i < rounds; i++) {
      loads.push(machineLoad());
      b.push(await load(bareUrl, { connections, durationSec }));
      p.push(await load(profileUrl, { connections, durationSec, headers }));
      const w = watch();
      const r = await load(url, { connections, durationSec, headers });
      l.push({ ...r, ...w.stop(r.reqPerSec * durationSec) });
    }
    const base = await directQueryLoad(stack.env.DATABASE_URL, t, connections, durationSec, Number(stack.env.DB_POOL_MAX ?? 5));
    const med = (rs: LoadResult[], k: keyof LoadResult) => median(rs.map((r) => r[k]));
    const line = (rs: LoadResult[]) =>
      `${fmt(med(rs, 'reqPerSec'), 0)} req/s  p50 ${med(rs, 'p50')} ms  p99 ${med(rs, 'p99')} ms  (rounds: ${rs.map((r) => `${fmt(r.reqPerSec, 0)} ${r.p50}/${r.p99}`).join(', ')})`;
    console.log(
      `\n== library: GET /api/images?limit=20 with ${count} images in the tenant (${connections} connections, ${rounds} x ${durationSec} s alternating with bare fastify and /api/profile) ==`,
    );
    console.log(`seeded by bulk INSERT in ${fmt(seedMs, 0)} ms; machine ${loads.join(', ')}`);
    console.log(`bare fastify                     ${line(b)}`);
    console.log(`GET /api/profile                 ${line(p)}`);
    console.log(
      `GET /api/images?limit=20         ${line(l)}  (target p99 < 25 ms)  non-2xx ${l.reduce((a, r) => a + r.non2xx, 0)}  errors ${l.reduce((a, r) => a + r.errors, 0)}`,
    );
    console.log(
      `  during the list's rounds: CPU ${l.map((r) => fmt(r.cpuMsPerReq, 3)).join(', ')} ms/request; GC ${l.map((r) => r.gc).join(' | ')}; event loop delay p99/max ${l.map((r) => `${fmt(r.eldP99)}/${fmt(r.eldMax, 0)}`).join(', ')} ms`,
    );
    console.log(
      `baseline: page query alone      ${fmt(base.perSec, 0)} calls/s  p50 ${fmt(base.p50)} ms  p99 ${fmt(base.p99)} ms  (pool ${base.pool})`,
    );
    console.log(`ratio API/baseline               ${fmt((100 * med(l, 'reqPerSec')) / base.perSec, 0)}% of the query's throughput`);
  } finally {
    await stack.stop();
    await bare.close();
    if (prev === undefined) delete process.env.RATE_LIMIT_DISABLED;
    else process.env.RATE_LIMIT_DISABLED = prev;
  }
}

interface Watched {
  cpuMsPerReq: number;
  /** GC pauses in the window by kind: count, total and longest pause (ms), and their share of the wall time. */
  gc: string;
  eldP99: number;
  eldMax: number;
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

/** This process's GC pauses, event loop delay and CPU from now until stop() (the stack runs in this process). */
function watch(): { stop(requests: number): Watched } {
  const pauses = new Map<string, { n: number; sum: number; max: number }>();
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = GC_KINDS[(e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
      const s = pauses.get(kind) ?? { n: 0, sum: 0, max: 0 };
      s.n++;
      s.sum += e.duration;
      s.max = Math.max(s.max, e.duration);
      pauses.set(kind, s);
    }
  });
  obs.observe({ entryTypes: ['gc'] });
  const eld = monitorEventLoopDelay({ resolution: 1 });
  eld.enable();
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  return {
    stop(requests) {
      const cpu = process.cpuUsage(cpu0);
      const wall = performance.now() - t0;
      obs.disconnect();
      eld.disable();
      const total = [...pauses.values()].reduce((a, s) => a + s.sum, 0);
      const gc = `${[...pauses].map(([k, s]) => `${s.n} ${k} (${fmt(s.sum, 0)} ms, max ${fmt(s.max)})`).join(', ')}: ${fmt((100 * total) / wall)}% of the time`;
      return {
        cpuMsPerReq: (cpu.user + cpu.system) / 1000 / Math.max(1, requests),
        gc,
        eldP99: eld.percentile(99) / 1e6,
        eldMax: eld.max / 1e6,
      };
    },
  };
}

/**
 * `callers` concurrent loops calling listImagesJson (the library's page query) for `durationSec` seconds on
 * a pool of `pool` connections (the library's DB_POOL_MAX in the stack), each with a signal and a deadline as the
 * library's handler passes them: the floor the API is measured against.
 */
async function directQueryLoad(databaseUrl: string, tenantId: string, callers: number, durationSec: number, pool: number) {
  const sql = createDb(databaseUrl, { schema: 'library', max: pool });
  const run = async (seconds: number, latencies?: number[]) => {
    const end = performance.now() + seconds * 1000;
    let calls = 0;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          const opts = { signal: new AbortController().signal, deadline: new Date(Date.now() + 30_000) };
          const page = await listImagesJson(sql, tenantId, {}, { limit: 20 }, '/files/', opts);
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
