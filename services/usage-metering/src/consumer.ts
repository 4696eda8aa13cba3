import { randomUUID } from 'node:crypto';
import { ExecutionFinished, ImageDeleted, ImageStored, QuotaCrossed } from '@imagegen/contracts/events/v1/events';
import {
  type EventMessage,
  type EventTransport,
  type Logger,
  onTenantChanged,
  type Sql,
  type Subscription,
  subjectFor,
  type TransactionSql,
  writeOutbox,
} from '@imagegen/platform';
import { applyEvents, type EventDelta, insertQuotaAlert, MIB, type MonthDelta, monthOf, stoppedByThresholdGuard, timeOf } from './store.js';
import type { TenantLimits, TenantLimitsCache } from './tenants.js';

export const USAGE_DURABLE = 'usage-metering';
export const TENANT_CHANGED_DURABLE = 'usage-metering-tenant-changed';
export const THRESHOLDS = [80, 100] as const;
/** Short: messages prefetched by a process that stopped or died come back within seconds. */
export const ACK_WAIT_MS = 5000;
/** Most events applied in one transaction. */
export const MAX_BATCH = 500;

/**
 * Image operations that are not executions of the generation service (library's scene URL imports,
 * product images): they count as one operation per stored image. Everything generation does
 * (generate, edit, upload for editing, character and product generations) counts once per request
 * through its ExecutionFinished event, whatever the number of images.
 */
export const NON_EXECUTION_OPERATIONS = new Set(['scene-reference', 'product']);

export interface ConsumerDeps {
  sql: Sql;
  events: EventTransport;
  eventsPrefix: string;
  tenants: TenantLimitsCache;
  logger: Logger;
  /** Messages in flight on the one durable consumer (parallel subscriptions; default 64). */
  concurrency?: number;
  /** Batch transactions running at once (default 2). */
  parallelBatches?: number;
  /** JetStream durable name (default USAGE_DURABLE); the processed_events key is always USAGE_DURABLE. */
  durable?: string;
  /**
   * How long an event arriving at rest (no batch being applied) waits for the ones right behind it before its
   * batch goes (default 10 ms; 0: at once). An image's ImageStored follows its execution's ExecutionFinished by
   * a few milliseconds: they go in one statement instead of one each. Under load batches gather while others
   * are applied, so nothing waits there.
   */
  lingerMs?: number;
  /** Called after an event's transaction committed (benchmarks, tests); applied=false for a duplicate. */
  onApplied?: (m: EventMessage, applied: boolean) => void;
  /** Called with the number of messages of each batch applied (tests). */
  onBatch?: (messages: number) => void;
  /** Called with the month totals (tenant|month -> total_bytes) each batch committed: CheckQuota's cache. */
  onTotals?: (totals: Map<string, number>) => void;
}

export interface UsageConsumer {
  stop(): Promise<void>;
}

export function usageSubjects(prefix: string) {
  return {
    stored: subjectFor(prefix, 'library.image_stored'),
    deleted: subjectFor(prefix, 'library.image_deleted'),
    finished: subjectFor(prefix, 'generation.execution_finished'),
    quotaCrossed: subjectFor(prefix, 'usage.quota_crossed'),
  };
}

const zeroMonth = (): Omit<MonthDelta, 'tenantId' | 'month'> => ({
  operations: 0,
  failedOperations: 0,
  images: 0,
  bytes: 0,
  durationMs: 0,
  durationCount: 0,
  deletedImages: 0,
  deletedBytes: 0,
});

const hourOf = (d: Date) => new Date(Math.floor(d.getTime() / 3_600_000) * 3_600_000);

/** An event as the increments it causes; `stored` marks ImageStored (the only one that moves quota). */
export type Decoded = EventDelta & { stored: boolean };

export function decodeUsageEvent(s: ReturnType<typeof usageSubjects>, m: EventMessage): Decoded | null {
  if (m.subject === s.stored) {
    const e = ImageStored.decode(m.data);
    if (!e.tenantId) return null;
    const ops = NON_EXECUTION_OPERATIONS.has(e.operation) ? 1 : 0;
    return {
      ...zeroMonth(),
      id: m.id,
      tenantId: e.tenantId,
      month: monthOf(e.occurredAt),
      hour: hourOf(timeOf(e.occurredAt)),
      stored: true,
      operations: ops,
      hourOperations: ops,
      images: 1,
      bytes: Math.max(0, e.sizeBytes),
    };
  }
  if (m.subject === s.finished) {
    const e = ExecutionFinished.decode(m.data);
    if (!e.tenantId) return null;
    const completed = e.status === 'completed';
    return {
      ...zeroMonth(),
      id: m.id,
      tenantId: e.tenantId,
      month: monthOf(e.occurredAt),
      hour: hourOf(timeOf(e.occurredAt)),
      stored: false,
      operations: completed ? 1 : 0,
      hourOperations: completed ? 1 : 0,
      // A cancelled execution (issue 37) is neither an operation nor a failure: nothing of it counts.
      failedOperations: e.status === 'failed' ? 1 : 0,
      durationMs: completed ? Math.max(0, e.durationMs) : 0,
      durationCount: completed ? 1 : 0,
    };
  }
  if (m.subject === s.deleted) {
    const e = ImageDeleted.decode(m.data);
    if (!e.tenantId) return null;
    // Counted on the month the image was billed to; never reduces total_bytes (see docs/design/usage.md).
    return {
      ...zeroMonth(),
      id: m.id,
      tenantId: e.tenantId,
      month: monthOf(e.storedAt || e.occurredAt),
      hour: null,
      stored: false,
      hourOperations: 0,
      deletedImages: 1,
      deletedBytes: Math.max(0, e.sizeBytes),
    };
  }
  return null;
}

interface Pending {
  m: EventMessage;
  decoded: Decoded | null;
  resolve: (applied: boolean) => void;
  reject: (err: unknown) => void;
}

/**
 * Durable, idempotent consumer of ImageStored, ImageDeleted and ExecutionFinished.
 *
 * Events in flight (one per subscription, `concurrency` subscriptions on the same durable) are
 * applied together in one transaction (group commit): their processed_events rows (the dedupe table
 * consumeOnce uses; a duplicate or a replay counts once), the month and hour counters, and for
 * stored images the quota thresholds (alert row + QuotaCrossed in the outbox, in the same
 * transaction). Every message is acked only after that commit; on failure they all come back.
 * At most `parallelBatches` transactions run at once; while they run, the next batch gathers.
 * Rows are written in key order, so concurrent batches (and replicas) never deadlock.
 */
export async function startUsageConsumer(d: ConsumerDeps): Promise<UsageConsumer> {
  const s = usageSubjects(d.eventsPrefix);
  const log = d.logger.child({ component: 'usage-consumer' });
  // Thresholds already alerted (tenant|period|threshold): the common path after a crossing skips the insert.
  const alerted = new Set<string>();
  let queue: Pending[] = [];
  let flushing = 0;
  let lingering = false;
  const maxFlushes = Math.max(1, d.parallelBatches ?? 2);
  const lingerMs = Math.max(0, d.lingerMs ?? 10);

  async function thresholds(tx: TransactionSql, tenantId: string, period: string, totalBytes: number, limits: TenantLimits | null) {
    const reached: string[] = [];
    if (!limits || totalBytes <= 0) return reached;
    const quotaBytes = limits.monthlyQuotaMb * MIB;
    for (const threshold of THRESHOLDS) {
      if (totalBytes * 100 < threshold * quotaBytes) continue;
      const key = `${tenantId}|${period}|${threshold}`;
      reached.push(key);
      if (alerted.has(key)) continue;
      const eventId = randomUUID();
      const inserted = await insertQuotaAlert(tx, {
        tenantId,
        period,
        threshold,
        usageBytes: totalBytes,
        quotaMb: limits.monthlyQuotaMb,
        eventId,
      });
      if (!inserted) continue;
      const msg = QuotaCrossed.fromPartial({
        tenantId,
        threshold,
        billingPeriod: period,
        currentUsageMb: Math.round((totalBytes / MIB) * 100) / 100,
        quotaMb: limits.monthlyQuotaMb,
        occurredAt: new Date().toISOString(),
      });
      await writeOutbox(tx, { id: eventId, subject: s.quotaCrossed, data: QuotaCrossed.encode(msg).finish() });
      log.info({ tenantId, period, threshold, totalBytes }, 'quota threshold crossed');
    }
    return reached;
  }

  async function applyBatch(batch: Pending[]): Promise<Set<string>> {
    const unique = new Map<string, Decoded>();
    for (const p of batch) if (p.decoded && !unique.has(p.decoded.id)) unique.set(p.decoded.id, p.decoded);
    const events = [...unique.values()];
    // Quotas of the tenants storing images, looked up before the transaction (cached), never while holding locks.
    const storing = [...new Set(events.filter((e) => e.stored).map((e) => e.tenantId))];
    const limits = new Map<string, TenantLimits | null>();
    await Promise.all(storing.map(async (t) => limits.set(t, await d.tenants.get(t))));
    // The batch statement alone is atomic: a transaction only when stored bytes reach a quota threshold not yet
    // alerted, whose alert and QuotaCrossed must commit with the usage update. The statement's guard tells: it
    // fails whole when that happens, and the batch goes again in a transaction.
    const guarded = storing.filter((t) => limits.get(t));
    const committed = (r: { fresh: Set<string>; totals: Map<string, number> }) => {
      d.onTotals?.(r.totals);
      return r.fresh;
    };
    if (guarded.length === 0) return committed(await applyEvents(d.sql, USAGE_DURABLE, events));
    try {
      const quotaBytes = guarded.map((t) => (limits.get(t) as TenantLimits).monthlyQuotaMb * MIB);
      return committed(await applyEvents(d.sql, USAGE_DURABLE, events, { tenantIds: guarded, quotaBytes, thresholds: THRESHOLDS }));
    } catch (err) {
      if (!stoppedByThresholdGuard(err)) throw err;
    }
    const reachedAll: string[] = [];
    let committedTotals = new Map<string, number>();
    const fresh = await d.sql.begin(async (tx) => {
      const { fresh, totals } = await applyEvents(tx, USAGE_DURABLE, events);
      committedTotals = totals;
      const checked = new Set<string>();
      // Key order, like every other write here, so concurrent batches never deadlock.
      const byKey = [...events].sort((a, b) => (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : a.month < b.month ? -1 : 1));
      for (const e of byKey) {
        const mk = `${e.tenantId}|${e.month}`;
        if (!e.stored || !fresh.has(e.id) || checked.has(mk)) continue;
        checked.add(mk);
        reachedAll.push(...(await thresholds(tx, e.tenantId, e.month, totals.get(mk) ?? 0, limits.get(e.tenantId) ?? null)));
      }
      return fresh;
    });
    // Remembered only after the commit: a rolled back transaction must not hide a threshold.
    if (alerted.size > 50_000) alerted.clear();
    for (const k of reachedAll) alerted.add(k);
    d.onTotals?.(committedTotals);
    return fresh as Set<string>;
  }

  async function flush(): Promise<void> {
    if (flushing >= maxFlushes || lingering) return;
    flushing++;
    try {
      if (flushing === 1 && lingerMs > 0 && queue.length < MAX_BATCH) {
        // At rest: the events right behind this one join its batch (the lingering flush takes them all).
        lingering = true;
        await new Promise((r) => setTimeout(r, lingerMs));
        lingering = false;
      }
      while (queue.length > 0) {
        const batch = queue.slice(0, MAX_BATCH);
        queue = queue.slice(batch.length);
        try {
          const fresh = await applyBatch(batch);
          d.onBatch?.(batch.length);
          const counted = new Set<string>();
          for (const p of batch) {
            // The first copy of a new id is "applied"; duplicates (also within the batch) are not.
            const applied = fresh.has(p.m.id) && !counted.has(p.m.id) && p.decoded !== null;
            if (applied) counted.add(p.m.id);
            p.resolve(applied);
          }
        } catch (err) {
          log.warn({ err, events: batch.length }, 'usage batch failed; its events will be redelivered');
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      flushing--;
    }
  }

  const handler = async (m: EventMessage) => {
    let decoded: Decoded | null;
    try {
      decoded = decodeUsageEvent(s, m);
    } catch (err) {
      log.error({ err, id: m.id, subject: m.subject }, 'undecodable usage event skipped');
      return;
    }
    const applied = await new Promise<boolean>((resolve, reject) => {
      queue.push({ m, decoded, resolve, reject });
      void flush();
    });
    d.onApplied?.(m, applied);
  };

  const subs: Subscription[] = [];
  const concurrency = Math.max(1, d.concurrency ?? 64);
  try {
    // The first subscription creates the durable; the others attach to it in parallel.
    const subscribe = () =>
      d.events.subscribe({
        durable: d.durable ?? USAGE_DURABLE,
        subjects: [s.stored, s.deleted, s.finished],
        ackWaitMs: ACK_WAIT_MS,
        handler,
      });
    subs.push(await subscribe());
    const rest = await Promise.allSettled(Array.from({ length: concurrency - 1 }, subscribe));
    for (const r of rest) if (r.status === 'fulfilled') subs.push(r.value);
    const failed = rest.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    // Quota or rate-limit changes: every replica drops its cached tenant so the next lookup sees the new values.
    subs.push(
      await onTenantChanged(d.events, { eventsPrefix: d.eventsPrefix, durable: TENANT_CHANGED_DURABLE, logger: log }, (id) =>
        d.tenants.invalidate(id),
      ),
    );
  } catch (err) {
    await Promise.allSettled(subs.map((x) => x.stop()));
    throw err;
  }
  log.debug({ concurrency }, 'usage consumer started');
  return {
    async stop() {
      await Promise.allSettled(subs.map((x) => x.stop()));
    },
  };
}
