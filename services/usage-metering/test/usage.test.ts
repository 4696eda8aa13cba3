import { QuotaCrossed } from '@imagegen/contracts/events/v1/events';
import { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import {
  AppError,
  createClient,
  createDb,
  createInProcessTransport,
  createLogger,
  createTestDatabase,
  type EventMessage,
  type EventTransport,
  internalPrincipal,
  type RunningService,
  type Sql,
  subjectFor,
} from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { startUsageMetering, type UsageOptions } from '../src/service.js';
import { applyEvents, stoppedByThresholdGuard } from '../src/store.js';
import type { TenantLimits } from '../src/tenants.js';
import { deletedEvent, finishedEvent, MIB, storedEvent, testConfig, testContext } from './helpers.js';

// Quotas come from tenancy in production; here a table the test controls.
const limits = new Map<string, TenantLimits>();
const tenantLimits = async (id: string) => limits.get(id) ?? null;
const setTenant = (id: string, quotaMb: number, rate = 60) =>
  limits.set(id, { tenantName: `Tenant ${id}`, monthlyQuotaMb: quotaMb, rateLimitPerMinute: rate });

let db: { url: string; drop: () => Promise<void> };
let sql: Sql;

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'usage');
  sql = createDb(db.url, { schema: 'usage', max: 2 });
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

async function monthRow(tenantId: string, month = new Date().toISOString().slice(0, 7)) {
  const [r] = await sql`SELECT * FROM usage_months WHERE tenant_id = ${tenantId} AND month = ${month}`;
  if (!r) return undefined;
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])) as Record<string, number>;
}

async function images(tenantId: string): Promise<number> {
  const [r] = await sql`SELECT coalesce(sum(total_images), 0)::int AS n FROM usage_months WHERE tenant_id = ${tenantId}`;
  return r?.n ?? 0;
}

describe('usage-metering on JetStream', () => {
  const config = testConfig('');
  let events: EventTransport;
  let ctxBase: Awaited<ReturnType<typeof testContext>>;
  const running: RunningService[] = [];
  const crossed: QuotaCrossed[] = [];

  const start = async (opts: UsageOptions = {}, transport = events) => {
    const svc = await startUsageMetering({ ...ctxBase, events: transport }, { tenantLimits, tenantCacheMs: 0, ...opts });
    running.push(svc);
    return svc;
  };

  beforeAll(async () => {
    config.databaseUrl = db.url;
    ctxBase = await testContext(config);
    events = ctxBase.events;
    await events.subscribe({
      durable: 'test-quota-crossed',
      subjects: [subjectFor(config.eventsPrefix, 'usage.quota_crossed')],
      handler: async (m) => {
        crossed.push(QuotaCrossed.decode(m.data));
      },
    });
  });
  afterAll(async () => {
    for (const r of running) await r.stop();
    await events?.close();
  });

  it('counts replayed events once: a new durable re-reading the whole stream changes nothing', async () => {
    const tenant = 'replay';
    setTenant(tenant, 1000);
    const svc = await start();
    for (let i = 0; i < 20; i++) await events.publish(storedEvent(config.eventsPrefix, { tenantId: tenant, sizeBytes: 1000 }));
    await events.publish(finishedEvent(config.eventsPrefix, { tenantId: tenant, durationMs: 100 }));
    await events.publish(finishedEvent(config.eventsPrefix, { tenantId: tenant, durationMs: 300 }));
    await waitFor(async () => (await monthRow(tenant))?.total_operations === 2 && (await images(tenant)) === 20, {
      timeout: 15_000,
      message: 'first pass',
    });
    await svc.stop();

    // A second service instance on a brand-new durable: JetStream delivers every event of the stream again.
    let replayed = 0;
    const svc2 = await start({ durable: 'usage-metering-replay', onApplied: () => void replayed++ });
    await waitFor(() => replayed >= 22, { timeout: 15_000, message: 'replay' });
    const row = await monthRow(tenant);
    expect(row).toMatchObject({ total_images: 20, total_bytes: 20_000, total_operations: 2, duration_ms_sum: 400, duration_count: 2 });
    await svc2.stop();
  });

  it('loses nothing when the consumer stops mid-stream and events arrive while it is down', async () => {
    const tenant = 'restart';
    setTenant(tenant, 1000);
    let applied = 0;
    const svc = await start({ onApplied: () => void applied++ });
    for (let i = 0; i < 200; i++) await events.publish(storedEvent(config.eventsPrefix, { tenantId: tenant, sizeBytes: 10 }));
    await waitFor(() => applied >= 20, { timeout: 15_000, message: 'some events applied' });
    await svc.stop(); // mid-stream: part of the 200 is still unprocessed

    // Published while no consumer runs.
    for (let i = 0; i < 100; i++) await events.publish(storedEvent(config.eventsPrefix, { tenantId: tenant, sizeBytes: 10 }));

    // A new process: its own NATS connection, same durable.
    const ctx2 = await testContext(config);
    const svc2 = await start({}, ctx2.events);
    // Messages the stopped process had prefetched come back after the consumer's ack wait (5 s).
    await waitFor(async () => (await images(tenant)) === 300, { timeout: 30_000, message: 'all 300 events' });
    expect(await monthRow(tenant)).toMatchObject({ total_images: 300, total_bytes: 3000 });
    await svc2.stop();
    await ctx2.events.close();
  });

  it('counts an event committed but not acked (crash before ack) once', async () => {
    const tenant = 'noack';
    setTenant(tenant, 1000);
    let failures = 0;
    let applied = 0;
    let skipped = 0;
    const svc = await start({
      onApplied: (_m, wasApplied) => {
        if (wasApplied) applied++;
        else skipped++;
        // The first 5 handlers fail after their commit: JetStream redelivers them.
        if (failures < 5) {
          failures++;
          throw new Error('simulated crash after commit');
        }
      },
    });
    for (let i = 0; i < 10; i++) await events.publish(storedEvent(config.eventsPrefix, { tenantId: tenant, sizeBytes: 7 }));
    await waitFor(() => applied === 10 && skipped === 5, { timeout: 20_000, message: 'redeliveries' });
    expect(await monthRow(tenant)).toMatchObject({ total_images: 10, total_bytes: 70 });
    await svc.stop();
  });

  it('applies a batch in one statement until it reaches a threshold without an alert, then nothing of it', async () => {
    await (await start()).stop(); // the schema and its migrations (stopped: the next tests count their own deliveries)
    const tenant = 'guarded';
    const month = new Date().toISOString().slice(0, 7);
    const delta = (id: string, bytes: number) => ({
      id,
      tenantId: tenant,
      month,
      hour: null,
      operations: 0,
      hourOperations: 0,
      failedOperations: 0,
      images: 1,
      bytes,
      durationMs: 0,
      durationCount: 0,
      deletedImages: 0,
      deletedBytes: 0,
    });
    const guard = { tenantIds: [tenant], quotaBytes: [10 * MIB], thresholds: [80, 100] };
    const claimed = async (id: string) => (await sql`SELECT 1 FROM processed_events WHERE event_id = ${id}`).length === 1;
    await applyEvents(sql, 'guard-test', [delta('g1', 7 * MIB)], guard); // 70%
    expect((await monthRow(tenant))?.total_bytes).toBe(7 * MIB);
    const stopped = await applyEvents(sql, 'guard-test', [delta('g2', 1 * MIB)], guard).catch((e) => e); // would be 80%
    expect(stoppedByThresholdGuard(stopped)).toBe(true);
    expect((await monthRow(tenant))?.total_bytes).toBe(7 * MIB);
    expect(await claimed('g2')).toBe(false);
    // Once 80% has its alert, the same batch goes through; 100% would stop it again.
    await sql`INSERT INTO quota_alerts (tenant_id, billing_period, threshold, usage_bytes, quota_mb, event_id)
      VALUES (${tenant}, ${month}, 80, ${8 * MIB}, 10, gen_random_uuid())`;
    await applyEvents(sql, 'guard-test', [delta('g2', 1 * MIB)], guard);
    expect((await monthRow(tenant))?.total_bytes).toBe(8 * MIB);
    expect(await claimed('g2')).toBe(true);
    expect(stoppedByThresholdGuard(await applyEvents(sql, 'guard-test', [delta('g3', 2 * MIB)], guard).catch((e) => e))).toBe(true);
  });

  it('sends exactly one QuotaCrossed at exactly 80% and 100% per month, none after a restart or replay', async () => {
    const tenant = 'quota';
    setTenant(tenant, 10); // 10 MiB: 80% = 8 MiB exactly
    let applied = 0;
    const svc = await start({ onApplied: () => void applied++ });
    const pub = async (sizeBytes: number, occurredAt?: string) => {
      const before = applied;
      await events.publish(storedEvent(config.eventsPrefix, { tenantId: tenant, sizeBytes, occurredAt }));
      await waitFor(() => applied > before, { timeout: 15_000, message: 'event applied' });
    };
    const alerts = async () =>
      (await sql`SELECT threshold FROM quota_alerts WHERE tenant_id = ${tenant} ORDER BY threshold`).map((r) => r.threshold);
    const outbox = async () => Number((await sql`SELECT count(*)::int AS n FROM outbox`)[0].n);
    const outboxBefore = await outbox();

    await pub(4 * MIB);
    await pub(4 * MIB - 1); // 79.99%
    expect(await alerts()).toEqual([]);
    await pub(1); // exactly 80%
    expect(await alerts()).toEqual([80]);
    await pub(1 * MIB); // 90%
    await pub(1 * MIB); // exactly 100%
    expect(await alerts()).toEqual([80, 100]);
    await pub(3 * MIB); // 130%: nothing new
    expect(await outbox()).toBe(outboxBefore + 2);

    const mine = () => crossed.filter((c) => c.tenantId === tenant);
    await waitFor(() => mine().length === 2, { timeout: 15_000, message: 'QuotaCrossed events' });
    const period = new Date().toISOString().slice(0, 7);
    expect(mine().map((c) => [c.threshold, c.billingPeriod, c.quotaMb, c.currentUsageMb])).toEqual([
      [80, period, 10, 8],
      [100, period, 10, 10],
    ]);
    expect(Number.isNaN(Date.parse(mine()[0].occurredAt))).toBe(false);
    await svc.stop();

    // Restart (fresh in-memory state) and keep storing: no new alert for this period.
    applied = 0;
    const svc2 = await start({ onApplied: () => void applied++ });
    await pub(1 * MIB);
    expect(await alerts()).toEqual([80, 100]);
    expect(await outbox()).toBe(outboxBefore + 2);
    // Another month is another billing period: a big event last month crosses both there.
    const lastMonth = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() - 1, 15)).toISOString();
    await pub(20 * MIB, lastMonth);
    expect(await outbox()).toBe(outboxBefore + 4);
    await waitFor(() => mine().length === 4, { timeout: 15_000, message: 'QuotaCrossed of last month' });
    expect(
      mine()
        .slice(2)
        .map((c) => [c.threshold, c.billingPeriod]),
    ).toEqual([
      [80, lastMonth.slice(0, 7)],
      [100, lastMonth.slice(0, 7)],
    ]);
    await svc2.stop();
  });
});

describe('usage-metering with duplicate deliveries (in-process transport, no duplicate window)', () => {
  let svc: RunningService;
  let events: EventTransport;
  let client: ReturnType<typeof createClient<typeof UsageServiceService>>;
  let prefix: string;
  let applied = 0;

  beforeAll(async () => {
    const config = testConfig(db.url, { NATS_URL: '' });
    prefix = config.eventsPrefix;
    events = createInProcessTransport({ logger: createLogger('t', 'silent'), duplicateWindowMs: 0 });
    const ctx = await testContext(config, events);
    svc = await startUsageMetering(ctx, { tenantLimits, tenantCacheMs: 0, onApplied: () => void applied++ });
    client = createClient(UsageServiceService, svc.grpcAddress as string);
  });
  afterAll(async () => {
    client?.close();
    await svc?.stop();
    await events?.close();
  });

  const settle = async (n: number) => {
    const target = applied + n;
    return async () => waitFor(() => applied >= target, { timeout: 10_000, message: 'events applied' });
  };

  it('counts the same event id delivered twice once', async () => {
    setTenant('dup', 100);
    const wait = await settle(6);
    const a = storedEvent(prefix, { tenantId: 'dup', sizeBytes: 500 });
    const b = finishedEvent(prefix, { tenantId: 'dup', durationMs: 1200 });
    const c = deletedEvent(prefix, { tenantId: 'dup', sizeBytes: 500 });
    for (const e of [a, a, b, b, c, c]) await events.publish(e);
    await wait();
    expect(await monthRow('dup')).toMatchObject({
      total_images: 1,
      total_bytes: 500,
      total_operations: 1,
      deleted_images: 1,
      deleted_bytes: 500,
    });
    expect(
      Number(
        (
          await sql`SELECT count(*)::int AS n FROM processed_events WHERE consumer = 'usage-metering' AND event_id = ANY(${[a.id, b.id, c.id]})`
        )[0].n,
      ),
    ).toBe(3);
  });

  it('an event at rest waits for the one right behind it: an ExecutionFinished and its ImageStored go in one batch', async () => {
    // Each side on its own transport (its own durable), so the two consumers do not share the messages.
    const batchesWith = async (lingerMs: number): Promise<number[]> => {
      const config = testConfig(db.url, { NATS_URL: '' });
      const own = createInProcessTransport({ logger: createLogger('t', 'silent'), duplicateWindowMs: 0 });
      const batches: number[] = [];
      const s = await startUsageMetering(await testContext(config, own), {
        tenantLimits,
        tenantCacheMs: 0,
        batchLingerMs: lingerMs,
        onBatch: (n) => batches.push(n),
      });
      try {
        setTenant('linger', 100);
        await own.publish(finishedEvent(config.eventsPrefix, { tenantId: 'linger', durationMs: 900 }));
        await new Promise((r) => setTimeout(r, 3));
        await own.publish(storedEvent(config.eventsPrefix, { tenantId: 'linger', sizeBytes: 700 }));
        await waitFor(() => batches.reduce((a, b) => a + b, 0) >= 2, { timeout: 10_000, message: 'both events applied' });
        return batches;
      } finally {
        await s.stop();
        await own.close();
      }
    };
    expect(await batchesWith(50)).toEqual([2]);
    // Without the wait each event is its own statement: what the linger saves.
    expect(await batchesWith(0)).toEqual([1, 1]);
    expect(await monthRow('linger')).toMatchObject({ total_images: 2, total_bytes: 1400, total_operations: 2 });
  });

  it('GetUsage: months newest first, limit, avg duration, rolling 30 days, quota', async () => {
    const t = 'report';
    setTenant(t, 2, 120);
    const now = new Date();
    const monthsAgo = (n: number) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - n, 10, 12)).toISOString();
    const wait = await settle(8);
    for (const e of [
      storedEvent(prefix, { tenantId: t, sizeBytes: MIB, occurredAt: monthsAgo(2) }),
      storedEvent(prefix, { tenantId: t, sizeBytes: MIB / 2, occurredAt: monthsAgo(1) }),
      storedEvent(prefix, { tenantId: t, sizeBytes: (3 * MIB) / 2 }),
      storedEvent(prefix, { tenantId: t, sizeBytes: 1000, operation: 'scene-reference' }), // an operation of its own
      finishedEvent(prefix, { tenantId: t, durationMs: 1000 }),
      finishedEvent(prefix, { tenantId: t, durationMs: 2001 }),
      finishedEvent(prefix, { tenantId: t, durationMs: 99999, status: 'failed' }), // not in the average
      finishedEvent(prefix, { tenantId: t, durationMs: 500, occurredAt: monthsAgo(2) }),
    ]) {
      await events.publish(e);
    }
    await wait();
    const p = internalPrincipal(t);
    const res = await client.getUsage({ tenantId: t }, p);
    const cur = now.toISOString().slice(0, 7);
    expect(res.months.map((m) => m.month)).toEqual([cur, monthsAgo(1).slice(0, 7), monthsAgo(2).slice(0, 7)]);
    expect(res.months[0]).toEqual({
      month: cur,
      totalOperations: 3,
      totalImages: 2,
      totalBytes: (3 * MIB) / 2 + 1000,
      totalMb: 1.5,
      avgDurationMs: 1501,
    });
    expect(res.months[2]).toMatchObject({ totalOperations: 1, totalImages: 1, totalBytes: MIB, totalMb: 1, avgDurationMs: 500 });
    // Rolling 30 days: this month's images, and last month's only if within 30 days.
    const lastMonthRecent = Date.now() - Date.parse(monthsAgo(1)) < 30 * 86_400_000;
    expect(res.recent).toEqual({
      bytes: (3 * MIB) / 2 + 1000 + (lastMonthRecent ? MIB / 2 : 0),
      images: 2 + (lastMonthRecent ? 1 : 0),
    });
    expect(res.quota).toEqual({ monthlyQuotaMb: 2, monthlyUsedMb: 2, monthlyRemainingMb: 0, rateLimitPerMinute: 120 });

    expect((await client.getUsage({ tenantId: t, limit: 1 }, p)).months.map((m) => m.month)).toEqual([cur]);
    expect((await client.getUsage({ tenantId: t, limit: 24 }, p)).months).toHaveLength(3);
    for (const limit of [0, 25, -1]) {
      await expect(client.getUsage({ tenantId: t, limit }, p)).rejects.toMatchObject({ status: 400, body: { error: 'Invalid limit' } });
    }
    // The tenant comes from the principal when not given; another tenant's usage is not visible.
    const tenantPrincipal = { requestId: 'r1', tenantId: t, source: 'tenant_api' };
    expect((await client.getUsage({ tenantId: '' }, tenantPrincipal)).months).toHaveLength(3);
    await expect(client.getUsage({ tenantId: 'dup' }, tenantPrincipal)).rejects.toMatchObject({ status: 404 });
    await expect(client.getQuota({ tenantId: 'nobody' }, internalPrincipal('nobody'))).rejects.toMatchObject({
      status: 404,
      body: { error: 'Tenant not found' },
    });
  });

  it('GetUsage answers from one snapshot: months, rolling 30 days and quota agree while usage commits', async () => {
    const t = 'snapshot';
    setTenant(t, 1_000_000);
    const month = new Date().toISOString().slice(0, 7);
    let writing = true;
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
    // Usage commits through the consumer's own statement: the month and the hour move together.
    const writer = (async () => {
      for (let i = 0; i < 150; i++) {
        await applyEvents(sql, 'snapshot-test', [
          {
            id: `snapshot-${i}`,
            tenantId: t,
            month,
            hour,
            operations: 1,
            hourOperations: 1,
            failedOperations: 0,
            images: 1,
            bytes: MIB,
            durationMs: 0,
            durationCount: 0,
            deletedImages: 0,
            deletedBytes: 0,
          },
        ]);
      }
      writing = false;
    })();
    const p = internalPrincipal(t);
    let answers = 0;
    const reader = async () => {
      while (writing) {
        const res = await client.getUsage({ tenantId: t }, p);
        answers++;
        const bytes = res.months[0]?.totalBytes ?? 0;
        expect(res.recent).toEqual({ bytes, images: bytes / MIB });
        expect(res.quota?.monthlyUsedMb).toBe(bytes / MIB);
      }
    };
    await Promise.all([writer, reader(), reader(), reader()]);
    expect(answers).toBeGreaterThan(20);
  });

  it('CheckQuota allows until the month reaches the quota; deletes do not give quota back', async () => {
    const t = 'check';
    setTenant(t, 1);
    const p = internalPrincipal(t);
    expect(await client.checkQuota({ tenantId: t, incomingBytes: 10 }, p)).toEqual({ allowed: true, usedBytes: 0, quotaBytes: MIB });
    let wait = await settle(1);
    await events.publish(storedEvent(prefix, { tenantId: t, sizeBytes: MIB - 1 }));
    await wait();
    expect(await client.checkQuota({ tenantId: t, incomingBytes: 10 }, p)).toMatchObject({ allowed: true, usedBytes: MIB - 1 });
    wait = await settle(1);
    await events.publish(storedEvent(prefix, { tenantId: t, sizeBytes: 1 }));
    await wait();
    expect(await client.checkQuota({ tenantId: t, incomingBytes: 10 }, p)).toEqual({ allowed: false, usedBytes: MIB, quotaBytes: MIB });
    wait = await settle(1);
    await events.publish(deletedEvent(prefix, { tenantId: t, sizeBytes: MIB - 1 }));
    await wait();
    expect((await client.checkQuota({ tenantId: t, incomingBytes: 10 }, p)).allowed).toBe(false);
    expect(await client.getQuota({ tenantId: t }, p)).toEqual({
      monthlyQuotaMb: 1,
      monthlyUsedMb: 1,
      monthlyRemainingMb: 0,
      rateLimitPerMinute: 60,
    });
    // Quota raised by an admin: allowed again once the cache expires (here: no cache).
    setTenant(t, 2);
    expect((await client.checkQuota({ tenantId: t, incomingBytes: 10 }, p)).allowed).toBe(true);
    // Zero quota refuses everything.
    setTenant('zero', 0);
    expect(await client.checkQuota({ tenantId: 'zero', incomingBytes: 1 }, internalPrincipal('zero'))).toEqual({
      allowed: false,
      usedBytes: 0,
      quotaBytes: 0,
    });
    await expect(client.checkQuota({ tenantId: 'nobody', incomingBytes: 1 }, internalPrincipal())).rejects.toBeInstanceOf(AppError);
  });

  it("CheckQuota's cached month total: one read per lifetime, raised at once by this replica's own updates, another replica's seen after the lifetime", async () => {
    const config = testConfig(db.url, { NATS_URL: '' });
    const own = createInProcessTransport({ logger: createLogger('t', 'silent'), duplicateWindowMs: 0 });
    let ownApplied = 0;
    const ttlMs = 1500;
    const s = await startUsageMetering(await testContext(config, own), {
      tenantLimits,
      tenantCacheMs: ttlMs,
      batchLingerMs: 0,
      onApplied: () => void ownApplied++,
    });
    const c = createClient(UsageServiceService, s.grpcAddress as string);
    try {
      const t = 'cached-quota';
      setTenant(t, 1);
      const p = internalPrincipal(t);
      expect(await c.checkQuota({ tenantId: t, incomingBytes: 1 }, p)).toMatchObject({ allowed: true, usedBytes: 0 });
      // This replica's consumer applies an image: the next check sees it at once (no need to wait out the cache).
      await own.publish(storedEvent(config.eventsPrefix, { tenantId: t, sizeBytes: MIB - 10 }));
      await waitFor(() => ownApplied >= 1, { timeout: 10_000, message: 'event applied' });
      expect(await c.checkQuota({ tenantId: t, incomingBytes: 1 }, p)).toMatchObject({ allowed: true, usedBytes: MIB - 10 });
      // Another replica's update (written behind this one's back): not read again within the lifetime (asserted
      // unconditionally: the lifetime, 1.5 s, is far longer than an update and a check on any machine)...
      await sql`UPDATE usage_months SET total_bytes = total_bytes + 10 WHERE tenant_id = ${t}`;
      expect(await c.checkQuota({ tenantId: t, incomingBytes: 1 }, p)).toMatchObject({ allowed: true, usedBytes: MIB - 10 });
      // ...and seen once it is over: the quota is refused.
      const refused = await waitFor(
        async () => {
          const r = await c.checkQuota({ tenantId: t, incomingBytes: 1 }, p);
          return r.allowed ? undefined : r;
        },
        { interval: 100, message: 'the cached total to expire (the check refused)' },
      );
      expect(refused).toEqual({ allowed: false, usedBytes: MIB, quotaBytes: MIB });
      // GetQuota always reads the table.
      expect(await c.getQuota({ tenantId: t }, p)).toMatchObject({ monthlyUsedMb: 1, monthlyRemainingMb: 0 });
    } finally {
      c.close();
      await s.stop();
      await own.close();
    }
  });

  it('GetPlatformUsage: stored minus deleted, last 24 hours, top tenants of the month', async () => {
    const res = await client.getPlatformUsage({}, internalPrincipal());
    const [sums] =
      await sql`SELECT sum(total_images - deleted_images)::int AS i, sum(total_bytes - deleted_bytes)::bigint AS b FROM usage_months`;
    expect(res.totalImages).toBe(sums.i);
    expect(res.totalBytes).toBe(Number(sums.b));
    expect(res.imagesLast24h).toBeGreaterThan(0);
    expect(res.operationsLast24h).toBeGreaterThan(0);
    expect(res.topTenants.length).toBeGreaterThan(0);
    const bytes = res.topTenants.map((x) => x.bytes);
    expect([...bytes].sort((a, b) => b - a)).toEqual(bytes);
  });
});

export type { EventMessage };
