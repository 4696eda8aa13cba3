import { randomBytes, randomUUID } from 'node:crypto';
import { ImageStored } from '@imagegen/contracts/events/v1/events';
import {
  createDb,
  createEventTransport,
  createLogger,
  createResolver,
  createStorage,
  createTestDatabase,
  loadConfig,
  migrate,
  type ServiceContext,
  startOutboxRelay,
  subjectFor,
  writeOutbox,
} from '@imagegen/platform';
import { startUsageMetering } from '../../services/usage-metering/src/service.js';
import { fmt, machineLoad, percentile } from './util.js';

/**
 * Issue 6 benchmark: the usage event path on JetStream. A simulated library commits ImageStored to its
 * outbox (one transaction per image, as StoreImage does); the outbox relay publishes it; the usage
 * consumer applies it. Latency = commit of the ImageStored transaction -> commit of the usage update,
 * p50/p99 over 2,000 events paced at BENCH_USAGE_RATE events/s (default 400). Throughput = the
 * consumer draining a backlog of 5,000 events. Targets: p99 < 100 ms, >= 1,000 events/s.
 */
export async function benchUsage(): Promise<void> {
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const events = Number(process.env.BENCH_USAGE_EVENTS ?? 2000);
  const rate = Number(process.env.BENCH_USAGE_RATE ?? 400);
  const backlog = Number(process.env.BENCH_USAGE_BACKLOG ?? 5000);
  const db = await createTestDatabase(undefined, 'bench_usage');
  const config = loadConfig({
    DATABASE_URL: db.url,
    NATS_URL: natsUrl,
    EVENTS_PREFIX: `benchusage${randomBytes(4).toString('hex')}`,
    LOG_LEVEL: 'silent',
    DB_POOL_MAX: '10',
  } as NodeJS.ProcessEnv);
  const logger = createLogger('bench-usage', 'silent');
  const transport = await createEventTransport(config, logger);
  const ctx: ServiceContext = {
    config,
    logger,
    events: transport,
    storage: createStorage({ dataDir: '/tmp/bench-usage', publicBaseUrl: 'http://localhost' }),
    resolve: createResolver(config),
  };
  // The "library": its own schema with the platform outbox, relayed to JetStream.
  const lib = createDb(db.url, { schema: 'library', max: 4 });
  await migrate(lib, 'library');
  const relay = await startOutboxRelay({ sql: lib, schema: 'library', transport, logger });
  const subject = subjectFor(config.eventsPrefix, 'library.image_stored');
  const committed = new Map<string, number>();
  const latencies: number[] = [];
  let applied = 0;
  let firstAt = 0;
  let lastAt = 0;
  let done: (() => void) | undefined;
  let target = 0;
  const onApplied = (m: { id: string }, ok: boolean) => {
    if (!ok) return;
    applied++;
    lastAt = performance.now();
    if (applied === 1) firstAt = lastAt;
    const t0 = committed.get(m.id);
    if (t0 !== undefined) latencies.push(performance.now() - t0);
    if (applied >= target) done?.();
  };
  const tenantLimits = async () => ({ tenantName: 'bench', monthlyQuotaMb: 10_000_000, rateLimitPerMinute: 60 });
  const storeOne = async (tenantId: string) => {
    const id = randomUUID();
    const data = ImageStored.encode(
      ImageStored.fromPartial({
        tenantId,
        imageId: 1,
        sizeBytes: 123_456,
        thumbnailSizeBytes: 4_000,
        operation: 'generate',
        occurredAt: new Date().toISOString(),
        keyType: 'live',
      }),
    ).finish();
    await lib.begin(async (tx) => {
      await writeOutbox(tx, { id, subject, data });
      // Just before COMMIT is sent (the event cannot be seen earlier); includes the commit round trip.
      committed.set(id, performance.now());
    });
  };
  const waitApplied = (n: number, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      target = n;
      if (applied >= n) return resolve();
      const t = setTimeout(() => reject(new Error(`only ${applied} of ${n} events applied in ${timeoutMs} ms`)), timeoutMs);
      done = () => {
        clearTimeout(t);
        resolve();
      };
    });

  let svc = await startUsageMetering(ctx, { tenantLimits, onApplied });
  try {
    // Warm-up (connections, JIT, consumer creation).
    for (let i = 0; i < 100; i++) await storeOne('warmup');
    await waitApplied(100, 30_000);
    latencies.length = 0;
    applied = 0;

    // 1. Latency: commits paced at `rate` events/s over 50 tenants.
    const machine = machineLoad();
    const start = performance.now();
    for (let i = 0; i < events; i++) {
      const due = start + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      await storeOne(`tenant-${i % 50}`);
    }
    await waitApplied(events, 60_000);
    const sorted = [...latencies].sort((a, b) => a - b);
    const p50 = percentile(sorted, 50);
    const p99 = percentile(sorted, 99);

    // 2. Throughput: a backlog committed while the consumer is stopped, then drained.
    await svc.stop();
    applied = 0;
    committed.clear();
    const ids: string[] = [];
    for (let b = 0; b < backlog; b += 250) {
      await lib.begin(async (tx) => {
        for (let i = b; i < Math.min(backlog, b + 250); i++) {
          const id = randomUUID();
          ids.push(id);
          const data = ImageStored.encode(
            ImageStored.fromPartial({
              tenantId: `bulk-${i % 50}`,
              imageId: i,
              sizeBytes: 1000,
              operation: 'generate',
              occurredAt: new Date().toISOString(),
            }),
          ).finish();
          await writeOutbox(tx, { id, subject, data });
        }
      });
    }
    // Everything on the stream before the consumer starts.
    for (let i = 0; i < 600 && (await relay.lag()) > 0; i++) await new Promise((r) => setTimeout(r, 50));
    svc = await startUsageMetering(ctx, { tenantLimits, onApplied });
    await waitApplied(backlog, 120_000);
    // From the first event applied to the last: the consumer's rate, startup excluded.
    const perSec = ((backlog - 1) / (lastAt - firstAt)) * 1000;

    const usageSql = createDb(db.url, { schema: 'usage', max: 1 });
    const check = await usageSql`SELECT sum(total_images)::int AS n FROM usage_months WHERE tenant_id LIKE 'bulk-%'`;
    await usageSql.end();
    console.log(`\n== usage: ImageStored commit -> usage row updated, on JetStream (${machine}) ==`);
    console.log(`latency over ${sorted.length} events at ${rate}/s   p50 ${fmt(p50)} ms  p99 ${fmt(p99)} ms (target p99 < 100 ms)`);
    console.log(
      `consumer throughput (backlog of ${backlog})  ${fmt(perSec, 0)} events/s (target >= 1000)  counted ${check[0].n}/${backlog}`,
    );
  } finally {
    await svc.stop().catch(() => {});
    await relay.stop();
    await lib.end();
    await transport.close();
    await db.drop();
  }
}
