import { createDb } from '@imagegen/platform';
import { startReceiver } from '../../services/webhook-dispatcher/test/receiver.js';
import { startTestStack } from '../support/stack.js';
import { fmt, machineLoad, percentile } from './util.js';

/**
 * `pnpm bench async` (issue 37): async jobs against the sandbox at zero delay, in one run, next to the
 * synchronous path of the same stack.
 * - sync: BENCH_ASYNC_SYNC (200) POST /api/images n=1 from BENCH_CONCURRENCY (8) clients: images/s, p50/p99.
 * - accept: BENCH_ASYNC_JOBS (1,000) submits with `Prefer: respond-async` while the tenant's job slots are all held
 *   (by jobs waiting upstream), so only acceptance runs: submits/s, p50/p99, and the CPU of the whole process
 *   (every service runs in it) per accepted job (process.cpuUsage; goal: under 2 ms).
 * - floor: the same number of GET /api/profile (authenticated, two cached look-ups): the CPU of a request that
 *   does almost nothing, the floor under the accept figure.
 * - drain: the slots are freed (cancelled) and the 1,000 queued jobs run: completed/s from the first start to the
 *   last completion, against the sync images/s.
 * - completion -> webhook: BENCH_ASYNC_HOOKED (200) jobs of a tenant whose endpoint (a local HTTPS receiver) takes
 *   generation.completed: p50/p99 from each execution's completed_at to its delivery's arrival (goal p99 < 1 s).
 * - fan-out: 10 tenants x 10 endpoints (the per-tenant maximum) taking image.stored, 20 images each: deliveries/s
 *   from the first image to the last delivery (2,000 deliveries to 100 endpoints).
 */
export async function benchAsync(): Promise<void> {
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8);
  const syncCount = Number(process.env.BENCH_ASYNC_SYNC ?? 200);
  const jobs = Number(process.env.BENCH_ASYNC_JOBS ?? 1000);
  const slots = 8;
  const hooked = Number(process.env.BENCH_ASYNC_HOOKED ?? 200);
  const rx = await startReceiver();
  const stack = await startTestStack({
    env: {
      WEBHOOK_CA_FILE: rx.caFile,
      RATE_LIMIT_DISABLED: '1',
      TENANT_MAX_GENERATIONS_IN_FLIGHT: '0',
      JOBS_RUNNING_PER_TENANT: String(slots),
      JOBS_QUEUED_PER_TENANT: String(jobs + 10),
      JOB_WORKERS: String(slots),
      JOB_POLL_MS: '100',
    },
  });
  const sql = createDb(stack.env.DATABASE_URL, { schema: 'generation', max: 2 });
  try {
    const tenant = await stack.createTenant({ rate_limit_per_minute: 100_000_000, monthly_quota_mb: 100_000_000 });
    const post = async (body: unknown, prefer?: string) => {
      const res = await fetch(`${stack.baseUrl}/api/images`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': tenant.liveKey, ...(prefer ? { prefer } : {}) },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as any };
    };
    /** Sends `count` requests from `concurrency` loops; latencies sorted, wall seconds. */
    const run = async (count: number, one: (i: number) => Promise<boolean>) => {
      const latencies: number[] = [];
      let next = 0;
      let failed = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < count) {
            const i = next++;
            const t0 = performance.now();
            if (await one(i)) latencies.push(performance.now() - t0);
            else failed++;
          }
        }),
      );
      latencies.sort((a, b) => a - b);
      return { seconds: (performance.now() - started) / 1000, latencies, failed };
    };

    // Warm-up, then the synchronous baseline.
    await run(40, async () => (await post({ prompt: 'warm up', n: 1 })).status === 200);
    const load0 = machineLoad();
    const sync = await run(syncCount, async () => (await post({ prompt: 'a benchmark lighthouse', n: 1 })).status === 200);

    // Hold every job slot of the tenant with jobs that wait upstream, so the submits below only queue.
    const holders: string[] = [];
    for (let i = 0; i < slots; i++)
      holders.push((await post({ prompt: `holder ${i} [[delay:600000]]` }, 'respond-async')).json.data.executionId);
    const running = async () =>
      Number((await sql`SELECT count(*)::int AS n FROM executions WHERE status = 'running' AND queued_at IS NOT NULL`)[0].n);
    while ((await running()) < slots) await new Promise((r) => setTimeout(r, 50));

    // The floor: the CPU of an authenticated request that does almost nothing (GET /api/profile), same clients.
    const floorCpu0 = process.cpuUsage();
    const floor = await run(jobs, async () => {
      const res = await fetch(`${stack.baseUrl}/api/profile`, { headers: { 'x-api-key': tenant.liveKey } });
      await res.arrayBuffer();
      return res.status === 200;
    });
    const floorCpu = process.cpuUsage(floorCpu0);
    const floorPerReqMs = (floorCpu.user + floorCpu.system) / 1000 / (jobs - floor.failed);

    const load1 = machineLoad();
    const cpu0 = process.cpuUsage();
    const accept = await run(jobs, async (i) => (await post({ prompt: `a benchmark job ${i}`, n: 1 }, 'respond-async')).status === 202);
    const cpu = process.cpuUsage(cpu0);
    const cpuPerJobMs = (cpu.user + cpu.system) / 1000 / (jobs - accept.failed);

    // Free the slots: the queued jobs run.
    const drainStart = performance.now();
    await Promise.all(holders.map((id) => stack.api(`/api/executions/${id}/cancel`, { method: 'POST', key: tenant.liveKey })));
    const left = async () => Number((await sql`SELECT count(*)::int AS n FROM executions WHERE status IN ('queued', 'running')`)[0].n);
    while ((await left()) > 0) await new Promise((r) => setTimeout(r, 100));
    const drainSeconds = (performance.now() - drainStart) / 1000;
    const [{ completed, failed }] = await sql`SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed,
      count(*) FILTER (WHERE status = 'failed')::int AS failed FROM executions WHERE queued_at IS NOT NULL AND operation <> ''`;

    // Completion -> generation.completed at the receiver.
    const hookTenant = await stack.createTenant({ rate_limit_per_minute: 100_000_000, monthly_quota_mb: 100_000_000 });
    const hook = await stack.api('/api/webhooks', {
      key: hookTenant.liveKey,
      body: { url: rx.url('/completed'), events: ['generation.completed'] },
    });
    if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
    const hookedIds: string[] = [];
    await run(hooked, async (i) => {
      const res = await fetch(`${stack.baseUrl}/api/images`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': hookTenant.liveKey, prefer: 'respond-async' },
        body: JSON.stringify({ prompt: `a hooked job ${i}`, n: 1 }),
      });
      const json = (await res.json()) as any;
      if (res.status === 202) hookedIds.push(json.data.executionId);
      return res.status === 202;
    });
    const delivered = () => new Set(rx.on('/completed').map((r) => JSON.parse(r.body).execution_id as string));
    const hookDeadline = Date.now() + 120_000;
    while (hookedIds.some((id) => !delivered().has(id)) && Date.now() < hookDeadline) await new Promise((r) => setTimeout(r, 100));
    const completedAt = new Map(
      (await sql`SELECT execution_id, completed_at FROM executions WHERE execution_id = ANY(${hookedIds}::text[])`).map((r) => [
        r.execution_id as string,
        (r.completed_at as Date).getTime(),
      ]),
    );
    const lags = rx
      .on('/completed')
      .map((r) => ({ id: JSON.parse(r.body).execution_id as string, at: r.at }))
      .filter((r) => completedAt.has(r.id))
      .map((r) => r.at - (completedAt.get(r.id) as number))
      .sort((a, b) => a - b);

    // Fan-out: 10 tenants x 10 endpoints on image.stored.
    const fanTenants = await Promise.all(
      Array.from({ length: 10 }, () => stack.createTenant({ rate_limit_per_minute: 100_000_000, monthly_quota_mb: 100_000_000 })),
    );
    for (const [ti, t] of fanTenants.entries())
      for (let e = 0; e < 10; e++) {
        const r = await stack.api('/api/webhooks', { key: t.liveKey, body: { url: rx.url(`/fan-${ti}-${e}`), events: ['image.stored'] } });
        if (r.status !== 201) throw new Error(`webhook: ${r.status} ${JSON.stringify(r.body)}`);
      }
    const fanStart = Date.now();
    await run(200, async (i) => {
      const t = fanTenants[i % 10];
      const res = await fetch(`${stack.baseUrl}/api/images`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': t.liveKey },
        body: JSON.stringify({ prompt: `a fanned image ${i}`, n: 1 }),
      });
      await res.arrayBuffer();
      return res.status === 200;
    });
    const fanned = () => rx.received.filter((r) => r.path.startsWith('/fan-'));
    const fanDeadline = Date.now() + 180_000;
    while (fanned().length < 2000 && Date.now() < fanDeadline) await new Promise((r) => setTimeout(r, 100));
    const fanEnd = Math.max(...fanned().map((r) => r.at));
    const fanPerSec = fanned().length / ((fanEnd - fanStart) / 1000);

    const syncPerSec = (syncCount - sync.failed) / sync.seconds;
    const donePerSec = Number(completed) / drainSeconds;
    console.log(`\n== async jobs: POST /api/images n=1, sandbox at zero delay, ${concurrency} clients, ${slots} job slots ==`);
    console.log(`machine                        ${load0} (sync), ${load1} (accept)`);
    console.log(
      `sync     ${syncCount} requests      ${fmt(syncPerSec)} images/s  p50 ${fmt(percentile(sync.latencies, 50))} ms  p99 ${fmt(percentile(sync.latencies, 99))} ms  failed ${sync.failed}`,
    );
    console.log(
      `accept   ${jobs} submits        ${fmt((jobs - accept.failed) / accept.seconds)} accepted/s  p50 ${fmt(percentile(accept.latencies, 50))} ms  p99 ${fmt(percentile(accept.latencies, 99))} ms  failed ${accept.failed}`,
    );
    console.log(`         CPU per accepted job ${fmt(cpuPerJobMs, 2)} ms (all services in this process; goal < 2 ms)`);
    console.log(
      `floor    GET /api/profile       CPU per request ${fmt(floorPerReqMs, 2)} ms, ${fmt((jobs - floor.failed) / floor.seconds)} req/s  (accept / floor ${fmt(cpuPerJobMs / floorPerReqMs, 2)})`,
    );
    console.log(
      `drain    ${completed} completed, ${failed} failed  ${fmt(donePerSec)} completed/s  (ratio to sync ${fmt(donePerSec / syncPerSec, 2)})`,
    );
    console.log(
      `webhook  completion -> generation.completed delivered: ${lags.length}/${hookedIds.length}  p50 ${fmt(percentile(lags, 50), 0)} ms  p99 ${fmt(percentile(lags, 99), 0)} ms  max ${fmt(lags.at(-1) ?? Number.NaN, 0)} ms (goal p99 < 1 s)`,
    );
    console.log(`fan-out  ${fanned().length} deliveries to 100 endpoints: ${fmt(fanPerSec)} deliveries/s (first image to last delivery)`);
  } finally {
    await sql.end();
    await stack.stop();
    await rx.stop();
  }
}
