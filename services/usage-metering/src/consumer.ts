import { randomUUID } from 'node:crypto';
import { ExecutionFinished, ImageDeleted, ImageStored, QuotaCrossed, TenantChanged } from '@imagegen/contracts/events/v1/events';
import {
  consumeOnce,
  type EventMessage,
  type EventTransport,
  type Logger,
  type Sql,
  type Subscription,
  subjectFor,
  type TransactionSql,
  writeOutbox,
} from '@imagegen/platform';
import { addUsage, insertQuotaAlert, MIB, monthOf, recordDelete, timeOf } from './store.js';
import type { TenantLimits, TenantLimitsCache } from './tenants.js';

export const USAGE_DURABLE = 'usage-metering';
export const TENANT_CHANGED_DURABLE = 'usage-metering-tenant-changed';
export const THRESHOLDS = [80, 100] as const;
export const ACK_WAIT_MS = 5000;

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
  /** Parallel handlers on the one durable consumer (default 4). */
  concurrency?: number;
  /** JetStream durable name (default USAGE_DURABLE); the processed_events key is always USAGE_DURABLE. */
  durable?: string;
  /** Called after an event's transaction committed (benchmarks, tests). */
  onApplied?: (m: EventMessage, applied: boolean) => void;
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
    tenantChanged: subjectFor(prefix, 'tenancy.tenant_changed'),
  };
}

/**
 * Durable, idempotent consumer of ImageStored, ImageDeleted and ExecutionFinished. Each event is
 * applied in one transaction with its processed_events row (consumeOnce), so a duplicate or a
 * replay counts once, and it is acked only after the commit, so a consumer stopped mid-stream
 * resumes at the first unacked event.
 */
export async function startUsageConsumer(d: ConsumerDeps): Promise<UsageConsumer> {
  const s = usageSubjects(d.eventsPrefix);
  const log = d.logger.child({ component: 'usage-consumer' });
  // Thresholds already alerted, so the common path after a crossing skips the insert attempt.
  const alerted = new Set<string>();

  /** Inserts the alert rows and outbox events of thresholds reached; returns their keys. */
  async function checkThresholds(
    tx: TransactionSql,
    tenantId: string,
    period: string,
    totalBytes: number,
    limits: TenantLimits | null,
  ): Promise<string[]> {
    const reached: string[] = [];
    if (!limits || totalBytes <= 0) return reached;
    const quotaBytes = limits.monthlyQuotaMb * MIB;
    for (const threshold of THRESHOLDS) {
      if (totalBytes * 100 < threshold * quotaBytes) continue;
      const key = `${tenantId}|${period}|${threshold}`;
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
      if (inserted) {
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
      reached.push(key);
    }
    return reached;
  }

  async function apply(m: EventMessage): Promise<boolean> {
    if (m.subject === s.stored) {
      const e = ImageStored.decode(m.data);
      if (!e.tenantId) return false;
      // Looked up before the transaction (cached), never while holding row locks.
      const limits = await d.tenants.get(e.tenantId);
      const at = timeOf(e.occurredAt);
      const period = monthOf(e.occurredAt);
      let reached: string[] = [];
      const applied = await consumeOnce(d.sql, USAGE_DURABLE, m.id, async (tx) => {
        const total = await addUsage(tx, {
          tenantId: e.tenantId,
          at,
          images: 1,
          bytes: e.sizeBytes,
          operations: NON_EXECUTION_OPERATIONS.has(e.operation) ? 1 : 0,
        });
        reached = await checkThresholds(tx, e.tenantId, period, total, limits);
      });
      // Remembered only after the commit: a rolled back transaction must not hide a threshold.
      for (const k of reached) alerted.add(k);
      if (alerted.size > 50_000) alerted.clear();
      return applied;
    }
    if (m.subject === s.finished) {
      const e = ExecutionFinished.decode(m.data);
      if (!e.tenantId) return false;
      const completed = e.status === 'completed';
      return consumeOnce(d.sql, USAGE_DURABLE, m.id, async (tx) => {
        await addUsage(tx, {
          tenantId: e.tenantId,
          at: timeOf(e.occurredAt),
          operations: completed ? 1 : 0,
          failedOperations: completed ? 0 : 1,
          durationMs: completed ? Math.max(0, e.durationMs) : 0,
          durationCount: completed ? 1 : 0,
        });
      });
    }
    if (m.subject === s.deleted) {
      const e = ImageDeleted.decode(m.data);
      if (!e.tenantId) return false;
      return consumeOnce(d.sql, USAGE_DURABLE, m.id, async (tx) => {
        await recordDelete(tx, e.tenantId, monthOf(e.storedAt || e.occurredAt), Math.max(0, e.sizeBytes));
      });
    }
    return false;
  }

  const subs: Subscription[] = [];
  const concurrency = Math.max(1, d.concurrency ?? 4);
  for (let i = 0; i < concurrency; i++) {
    subs.push(
      await d.events.subscribe({
        durable: d.durable ?? USAGE_DURABLE,
        subjects: [s.stored, s.deleted, s.finished],
        // Short: messages prefetched by a process that stopped or died come back within seconds
        // (handlers are kept alive with in-progress acks, so slow ones are not redelivered).
        ackWaitMs: ACK_WAIT_MS,
        handler: async (m) => {
          const applied = await apply(m);
          d.onApplied?.(m, applied);
        },
      }),
    );
  }
  // Quota or rate-limit changes: drop the cached tenant so the next lookup sees the new values.
  subs.push(
    await d.events.subscribe({
      durable: TENANT_CHANGED_DURABLE,
      subjects: [s.tenantChanged],
      handler: async (m) => {
        const e = TenantChanged.decode(m.data);
        if (e.tenantId) d.tenants.invalidate(e.tenantId);
      },
    }),
  );
  log.debug({ concurrency }, 'usage consumer started');
  return {
    async stop() {
      await Promise.allSettled(subs.map((x) => x.stop()));
    },
  };
}
