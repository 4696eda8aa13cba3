import { createDb } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Journey, type PrivateNats, type ServiceName, sleep, startJourney, startPrivateNats } from '../distributed/harness.js';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.js';
import { waitFor } from '../support/wait.js';
import { assertConsistent, load } from './support.js';

/**
 * PostgreSQL outage under load (issue 13, items 1-2 and 7): the distributed shape (one process per service)
 * on a private PostgreSQL, a few clients generating images through the gateway, PostgreSQL stopped (fast
 * shutdown) for 10 s and started again. Crash-only and fail-fast (ARCHITECTURE rule 8): no process dies,
 * every request that fails during the outage answers 503 + Retry-After quickly, readiness turns 503 on
 * every service that needs the database, and the first request after the restart succeeds within seconds.
 * Then NATS (a private server) is stopped: usage-metering stays ready, its gRPC answering from PostgreSQL.
 *
 * The figures are printed (`[db-outage] ...`) for the record.
 */

const OUTAGE_MS = 10_000;
const CLIENTS = 4;
const READY_CHECKED: ServiceName[] = ['gateway', 'library', 'generation', 'usage-metering', 'webhook-dispatcher', 'tenancy'];

let pg: PrivatePostgres;
let nats: PrivateNats;
let j: Journey;

beforeAll(async () => {
  pg = await startPrivatePostgres();
  nats = await startPrivateNats();
  j = await startJourney({
    databaseUrl: pg.url,
    natsUrl: nats.url,
    env: { RATE_LIMIT_DISABLED: '1', TENANT_MAX_GENERATIONS_IN_FLIGHT: '64', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn' },
  });
}, 180_000);

afterAll(async () => {
  if (pg && !pg.running) await pg.start().catch(() => {});
  await j?.stop();
  await pg?.close();
  await nats?.close();
}, 60_000);

describe('PostgreSQL outage under generation load', () => {
  it('no process dies, failures are fast 503s with Retry-After, readiness follows, recovery within seconds', async () => {
    const t = await j.createTenant();
    const warm = await j.api('/api/images', { key: t.liveKey, body: { prompt: 'warm up', n: 1 } });
    expect(warm.status, JSON.stringify(warm.body)).toBe(200);

    // Each client sends its next request when the last one is answered, or, while PostgreSQL is stopped, after
    // 1 s if it is not: a request in flight at the stop may rightly wait for the outcome of its final write (see
    // complete() in services/generation/src/executions.ts), and must not keep its client from sending during the
    // outage.
    let outage = false;
    const l = load(j, t, () => ({ prompt: 'outage load', n: 1 }), { clients: CLIENTS, overlap: () => outage, timeoutMs: 30_000 });
    const samples = l.answers;

    const readiness: { service: ServiceName; at: number; status: number }[] = [];
    let probing = false;
    const probe = async () => {
      while (probing) {
        await Promise.all(
          READY_CHECKED.map(async (service) => {
            const at = Date.now();
            const status = await fetch(`${j.services.get(service)?.opsUrl}/readyz`, { signal: AbortSignal.timeout(5000) }).then(
              async (r) => {
                await r.arrayBuffer();
                return r.status;
              },
              () => 0,
            );
            readiness.push({ service, at, status });
          }),
        );
        await sleep(300);
      }
    };

    // The load is running: as many successes as clients before the stop.
    await waitFor(() => samples.filter((s) => s.status === 200).length >= CLIENTS, {
      message: `${CLIENTS} successes before the outage`,
      timeout: 30_000,
      interval: 50,
    });
    const down = Date.now();
    await pg.stop();
    outage = true;
    probing = true;
    const prober = probe();
    await sleep(OUTAGE_MS);
    probing = false;
    await prober;
    await pg.start();
    const up = Date.now();
    outage = false;

    // Load goes on until the first success after the restart (or 30 s), then 2 s more.
    const firstOk = await waitFor(
      async () => samples.find((s) => s.status === 200 && s.start >= up)?.end ?? samples.find((s) => s.status === 200 && s.end >= up)?.end,
      { message: 'a successful generation after the restart', timeout: 30_000, interval: 50 },
    ).catch(() => undefined);
    await sleep(2000);
    await l.stop();

    // ---- figures ----
    const inOutage = samples.filter((s) => s.start >= down && s.start < up);
    const failed = samples.filter((s) => s.status !== 200);
    const failedInOutage = inOutage.filter((s) => s.status !== 200);
    const longest = Math.max(0, ...failedInOutage.map((s) => s.end - s.start));
    // In flight when PostgreSQL stopped: their answers wait for the outcome of a final write (see complete()).
    const spanning = samples.filter((s) => s.start < down && s.end > down);
    const byStatus: Record<string, number> = {};
    for (const s of failed) byStatus[s.status] = (byStatus[s.status] ?? 0) + 1;
    const dead = [...j.services.values()].filter((sp) => sp.proc && (sp.proc.exitCode !== null || sp.proc.signalCode !== null));
    const notReady = Object.fromEntries(
      READY_CHECKED.map((svc) => {
        const late = readiness.filter((r) => r.service === svc && r.at >= down + 2500);
        return [svc, `${late.filter((r) => r.status === 503).length}/${late.length}`];
      }),
    );
    const recoveryMs = firstOk === undefined ? undefined : firstOk - up;
    const figures =
      `[db-outage] requests ${samples.length} (ok ${samples.filter((s) => s.status === 200).length}, failed ${failed.length} by status ${JSON.stringify(byStatus)}); ` +
      `during the outage ${inOutage.length} started, ${failedInOutage.length} failed, longest failure ${longest} ms, ` +
      `without Retry-After ${failed.filter((s) => !s.retryAfter).length}; readyz 503 (probes from +2.5 s) ${JSON.stringify(notReady)}; ` +
      `in flight at the stop ${JSON.stringify(spanning.map((s) => ({ status: s.status, ms: s.end - s.start, endedAfterUp: s.end - up })))}; ` +
      `first success ${recoveryMs ?? 'never'} ms after the restart; dead processes ${dead.map((d) => `${d.name}(${d.proc?.exitCode ?? d.proc?.signalCode})`).join(', ') || 'none'}`;
    console.log(figures);

    let stoodAt = '';
    if (failed.some((s) => s.status === 0) || failedInOutage.length === 0) {
      // A request that hung, or an outage no request saw (each seen once in CI, never reproduced): where the
      // generations stood, and what the services said.
      const diag = createDb(j.env.DATABASE_URL, { schema: 'public', max: 1 });
      try {
        const rows = await diag`SELECT execution_id, status, current_step, started_at, updated_at FROM generation.executions
          WHERE tenant_id = ${t.tenantId} AND started_at >= ${new Date(down - 5000)} ORDER BY started_at`;
        // The CI log keeps only its tail: the assertion's message carries where the generations stood.
        stoodAt = `\n[db-outage] executions since the stop ${JSON.stringify(rows.map((r) => [r.status, r.current_step, r.started_at, r.updated_at]))}`;
        console.log(
          `[db-outage] hung requests ${JSON.stringify(failed.filter((s) => s.status === 0))}\n` +
            `[db-outage] executions since the stop ${JSON.stringify(rows)}\n` +
            READY_CHECKED.map((svc) => `--- ${svc} log (tail)\n${j.logs(svc).slice(-4000)}`).join('\n'),
        );
      } finally {
        await diag.end();
      }
    }
    expect(dead.map((d) => `${d.name}: exit ${d.proc?.exitCode ?? d.proc?.signalCode}\n${j.logs(d.name).slice(-3000)}`)).toEqual([]);
    expect(failedInOutage.length, figures + stoodAt).toBeGreaterThan(0);
    for (const s of failed) {
      expect(s.status, `${JSON.stringify(s)}\n${figures}`).toBe(503);
      expect(s.retryAfter, JSON.stringify(s)).toMatch(/^\d+$/);
    }
    // About 2 s (connect timeout 2 s); the bound leaves room for a CI machine running other suites at once,
    // and still fails on the old behaviour (hangs of 5-20 s). The figures above are what to read.
    expect(longest, figures).toBeLessThanOrEqual(4000);
    for (const svc of READY_CHECKED) {
      const late = readiness.filter((r) => r.service === svc && r.at >= down + 2500);
      expect(late.length, svc).toBeGreaterThan(0);
      expect(
        late.every((r) => r.status === 503),
        `${svc} readyz during the outage: ${late.map((r) => r.status).join(',')}`,
      ).toBe(true);
    }
    expect(recoveryMs, `first success after the restart (ms)\n${figures}`).toBeDefined();
    expect(recoveryMs as number).toBeLessThanOrEqual(4000);

    // Everything is ready again.
    for (const svc of READY_CHECKED) {
      await waitFor(async () => (await fetch(`${j.services.get(svc)?.opsUrl}/readyz`)).status === 200, {
        message: `${svc} ready again`,
        timeout: 10_000,
        interval: 100,
      });
    }

    // Nothing lost, doubled or left behind: usage and the gallery equal the 200 answers, no execution is
    // left running (final states were retried until the database came back), no orphan files.
    const db = createDb(j.env.DATABASE_URL, { schema: 'public', max: 2 });
    try {
      const warmImages = warm.body.data.images.map((i: { record_id: number; size_bytes: number }) => ({
        id: i.record_id,
        bytes: i.size_bytes,
      }));
      const consistent = await assertConsistent(j, db, t, [...samples, { start: 0, end: 0, status: 200, images: warmImages }]);
      console.log(`[db-outage] after recovery: ${JSON.stringify(consistent)}`);
    } finally {
      await db.end();
    }
  }, 120_000);

  it('usage-metering stays ready while NATS is down (its gRPC answers from PostgreSQL)', async () => {
    const usage = j.services.get('usage-metering')?.opsUrl;
    await waitFor(async () => (await fetch(`${usage}/readyz`)).status === 200, {
      message: 'usage-metering ready',
      timeout: 10_000,
      interval: 100,
    });
    const disconnects = () =>
      j
        .logs('usage-metering')
        .split('\n')
        .filter((l) => l.includes('nats disconnected')).length;
    const before = disconnects();
    await nats.stop();
    try {
      // Once the transport has noticed (its connection closes at once on a stopped server).
      await waitFor(() => disconnects() > before, { message: "usage-metering's 'nats disconnected'", timeout: 10_000, interval: 50 });
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        statuses.push((await fetch(`${usage}/readyz`)).status);
        await sleep(200);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200]);
    } finally {
      await nats.start();
    }
  }, 30_000);
});
