import { createDb } from '@imagegen/platform';
import { sessionImagesJson } from '../../services/library/src/images/store.js';
import { startTestStack } from '../support/stack.js';
import { seedScale } from './scale-seed.js';
import { fmt, load, machineLoad, median, percentile, type TimedLoad } from './util.js';

/**
 * `pnpm bench session-detail` (issue 36 item 5): `GET /api/sessions/:id` of a 1,000-image session through the
 * gateway, as a client feels it. Cold: every read renders the session (the sessions are read in turn and the
 * stack keeps 2 MiB of renderings, so none is ever found kept); warm: the same session again (served from the
 * session JSON cache). Each by one client (p50/p99 timed to the microsecond) and by 8 connections (p50/p99,
 * req/s); and the library's rendering statement called directly (sessionImagesJson, one caller, no HTTP or gRPC).
 * Rounds of every operation in turn; the figures are the medians of the rounds [min..max] and, for one client,
 * the percentiles of every request of the run.
 *
 * BENCH_ROUNDS (default 4), BENCH_SESSIONS (default 20), BENCH_SEQUENTIAL (requests per one-client turn, default
 * 100), BENCH_SECONDS (per 8-connection turn, default 4). Runs only when named.
 */
export async function benchSessionDetail(): Promise<void> {
  const rounds = Number(process.env.BENCH_ROUNDS ?? 4);
  const sessions = Number(process.env.BENCH_SESSIONS ?? 20);
  const sequential = Number(process.env.BENCH_SEQUENTIAL ?? 100);
  const durationSec = Number(process.env.BENCH_SECONDS ?? 4);
  process.env.RATE_LIMIT_DISABLED = '1';
  const stack = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1', SESSION_JSON_CACHE_MB: '2' } });
  const direct = createDb(stack.env.DATABASE_URL, { schema: 'library', max: 1 });
  try {
    const tenant = await stack.createTenant();
    const t = tenant.tenantId;
    const seeded = await seedScale(stack.env.DATABASE_URL, { tenants: [{ id: t, count: sessions * 1000 }], others: 0, otherTenants: 1 });
    const headers = { 'x-api-key': tenant.liveKey };
    const paths = Array.from({ length: sessions }, (_, i) => `/api/sessions/scale-${t}-${i}`);
    const url = `${stack.baseUrl}${paths[0]}`;
    const check = await fetch(url, { headers });
    const body = (await check.json()) as { data?: { images?: unknown[] } };
    if (check.status !== 200 || body.data?.images?.length !== 1000) throw new Error(`session detail: ${check.status}`);
    console.log(`\n== session detail: GET /api/sessions/:id, 1,000 images, ${sessions} sessions ==`);
    console.log(`seeded ${seeded.rows} rows in ${fmt(seeded.ms / 1000, 1)} s; ${machineLoad()}`);

    const ops: Record<string, () => Promise<TimedLoad>> = {
      'cold, 1 client': () => load(url, { connections: 1, durationSec: 0, headers, paths, sequential }),
      'cold, 8 connections': () => load(url, { connections: 8, durationSec, headers, paths }),
      'warm, 1 client': async () => {
        await load(url, { connections: 1, durationSec: 0, headers, sequential: 2 }); // kept again
        return load(url, { connections: 1, durationSec: 0, headers, sequential });
      },
      'warm, 8 connections': () => load(url, { connections: 8, durationSec, headers }),
      'statement alone (sessionImagesJson)': async () => {
        const latencies: number[] = [];
        const t0 = performance.now();
        for (let i = 0; i < sequential; i++) {
          const s = performance.now();
          if (!(await sessionImagesJson(direct, t, `scale-${t}-${i % sessions}`, 1000, 'http://x/files/'))) throw new Error('not rendered');
          latencies.push(performance.now() - s);
        }
        const reqPerSec = sequential / ((performance.now() - t0) / 1000);
        latencies.sort((a, b) => a - b);
        return { reqPerSec, p50: percentile(latencies, 50), p99: percentile(latencies, 99), non2xx: 0, errors: 0, latencies };
      },
    };
    for (const op of Object.values(ops)) await op(); // warm-up
    const results = new Map<string, TimedLoad[]>();
    for (let round = 0; round < rounds; round++) {
      for (const [name, op] of Object.entries(ops)) {
        const r = await op();
        if (r.non2xx || r.errors) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        results.set(name, [...(results.get(name) ?? []), r]);
      }
      console.log(`round ${round + 1}/${rounds}; ${machineLoad()}`);
    }
    const range = (xs: number[], digits: number) =>
      `${fmt(median(xs), digits)} [${fmt(Math.min(...xs), digits)}..${fmt(Math.max(...xs), digits)}]`;
    for (const [name, rs] of results) {
      const pooled = rs.every((r) => r.latencies) ? rs.flatMap((r) => r.latencies as number[]).sort((a, b) => a - b) : undefined;
      console.log(
        `${name.padEnd(37)} p50 ${range(
          rs.map((r) => r.p50),
          2,
        )} ms  p99 ${range(
          rs.map((r) => r.p99),
          2,
        )} ms  ${range(
          rs.map((r) => r.reqPerSec),
          0,
        )} req/s` +
          (pooled ? `  (all ${pooled.length}: p50 ${fmt(percentile(pooled, 50), 2)}, p99 ${fmt(percentile(pooled, 99), 2)} ms)` : ''),
      );
    }
  } finally {
    await direct.end();
    await stack.stop();
  }
}
