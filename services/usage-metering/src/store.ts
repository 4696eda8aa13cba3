import type { Sql, TransactionSql } from '@imagegen/platform';

export const MIB = 1024 * 1024;

/** YYYY-MM of an ISO timestamp (UTC); falls back to now for a missing or unparsable value. */
export function monthOf(iso?: string): string {
  const d = iso ? new Date(iso) : new Date();
  const t = Number.isNaN(d.getTime()) ? new Date() : d;
  return t.toISOString().slice(0, 7);
}

/** The event time as a Date (now when missing or unparsable). */
export function timeOf(iso?: string): Date {
  const d = iso ? new Date(iso) : new Date();
  return Number.isNaN(d.getTime()) ? new Date() : d;
}

export const currentMonth = () => new Date().toISOString().slice(0, 7);

/** One (tenant, month) row's increments; deletes count on the month the image was billed to. */
export interface MonthDelta {
  tenantId: string;
  month: string;
  operations: number;
  failedOperations: number;
  images: number;
  bytes: number;
  durationMs: number;
  durationCount: number;
  deletedImages: number;
  deletedBytes: number;
}

/** One event's increments (a row of the batch statement). */
export interface EventDelta extends Omit<MonthDelta, 'tenantId' | 'month'> {
  id: string;
  tenantId: string;
  month: string;
  /** Hour bucket (absent for deletes, which only touch the month they were billed to). */
  hour: Date | null;
  hourOperations: number;
}

/**
 * Quotas to hold a statement of applyEvents to: it fails whole with THRESHOLD_GUARD_CODE when a month of one of
 * these tenants it updates reaches one of the thresholds (percent of quotaBytes) and that threshold has no
 * quota_alerts row yet (migration 002): the same test as the consumer's thresholds(), made in the statement.
 */
export interface ThresholdGuard {
  tenantIds: string[];
  quotaBytes: number[];
  thresholds: readonly number[];
}

/** SQLSTATE of a statement stopped by its ThresholdGuard (nothing of it was applied). */
export const THRESHOLD_GUARD_CODE = 'UQ001';

export const stoppedByThresholdGuard = (err: unknown): boolean => (err as { code?: string })?.code === THRESHOLD_GUARD_CODE;

/**
 * Applies a batch of events in ONE statement: marks them processed (processed_events, the dedupe
 * table consumeOnce uses) and adds the increments of the ones that were new to their month and hour
 * rows (aggregated, in key order so concurrent writers never deadlock). `events` must have unique
 * ids. Returns the new ids and the month totals (tenant|month -> total_bytes) after the update.
 */
export async function applyEvents(
  tx: Sql | TransactionSql,
  consumer: string,
  events: EventDelta[],
  guard?: ThresholdGuard,
): Promise<{ fresh: Set<string>; totals: Map<string, number> }> {
  if (events.length === 0) return { fresh: new Set(), totals: new Map() };
  const col = <K extends keyof EventDelta>(k: K) => events.map((e) => e[k]);
  // A SELECT CTE runs only when read: `guarded` below reads it, and the function raises on its first row.
  const guardCte = guard
    ? tx`, guard AS (
      SELECT quota_threshold_unalerted() FROM months
      JOIN unnest(${guard.tenantIds}::text[], ${guard.quotaBytes}::bigint[]) AS g(t, q) ON g.t = months.tenant_id
      CROSS JOIN unnest(${guard.thresholds as number[]}::int[]) AS th(p)
      WHERE months.total_bytes > 0 AND months.total_bytes * 100 >= th.p::bigint * g.q
        AND NOT EXISTS (SELECT 1 FROM quota_alerts a WHERE a.tenant_id = months.tenant_id AND a.billing_period = months.month AND a.threshold = th.p)
    )`
    : tx``;
  const [row] = await tx`
    WITH ev AS (
      SELECT * FROM unnest(
        ${col('id')}::text[], ${col('tenantId')}::text[], ${col('month')}::text[],
        ${events.map((e) => (e.hour ? e.hour.toISOString() : null))}::timestamptz[],
        ${col('operations')}::bigint[], ${col('failedOperations')}::bigint[], ${col('images')}::bigint[], ${col('bytes')}::bigint[],
        ${col('durationMs')}::bigint[], ${col('durationCount')}::bigint[], ${col('deletedImages')}::bigint[], ${col('deletedBytes')}::bigint[],
        ${col('hourOperations')}::bigint[]
      ) AS e(id, t, m, h, o, f, i, b, ds, dc, di, db, ho)
    ), claimed AS (
      INSERT INTO processed_events (consumer, event_id)
      SELECT ${consumer}, id FROM ev ORDER BY id
      ON CONFLICT DO NOTHING RETURNING event_id
    ), fresh AS (
      SELECT ev.* FROM ev JOIN claimed ON claimed.event_id = ev.id
    ), months AS (
      INSERT INTO usage_months AS u (tenant_id, month, total_operations, failed_operations, total_images, total_bytes,
        duration_ms_sum, duration_count, deleted_images, deleted_bytes, updated_at)
      SELECT t, m, sum(o), sum(f), sum(i), sum(b), sum(ds), sum(dc), sum(di), sum(db), now()
      FROM fresh GROUP BY t, m ORDER BY t, m
      ON CONFLICT (tenant_id, month) DO UPDATE SET
        total_operations = u.total_operations + EXCLUDED.total_operations,
        failed_operations = u.failed_operations + EXCLUDED.failed_operations,
        total_images = u.total_images + EXCLUDED.total_images,
        total_bytes = u.total_bytes + EXCLUDED.total_bytes,
        duration_ms_sum = u.duration_ms_sum + EXCLUDED.duration_ms_sum,
        duration_count = u.duration_count + EXCLUDED.duration_count,
        deleted_images = u.deleted_images + EXCLUDED.deleted_images,
        deleted_bytes = u.deleted_bytes + EXCLUDED.deleted_bytes,
        updated_at = now()
      RETURNING u.tenant_id, u.month, u.total_bytes
    ), hours AS (
      INSERT INTO usage_hours AS hh (tenant_id, hour, operations, images, bytes)
      SELECT t, h, sum(ho), sum(i), sum(b) FROM fresh WHERE h IS NOT NULL GROUP BY t, h ORDER BY t, h
      ON CONFLICT (tenant_id, hour) DO UPDATE SET
        operations = hh.operations + EXCLUDED.operations,
        images = hh.images + EXCLUDED.images,
        bytes = hh.bytes + EXCLUDED.bytes
      RETURNING 1
    )${guardCte}
    SELECT
      coalesce((SELECT json_agg(event_id) FROM claimed), '[]'::json) AS fresh,
      coalesce((SELECT json_agg(json_build_array(tenant_id, month, total_bytes)) FROM months), '[]'::json) AS totals,
      (SELECT count(*) FROM hours) AS hours${guard ? tx`, (SELECT count(*) FROM guard) AS guarded` : tx``}`;
  const fresh = new Set<string>(row.fresh as string[]);
  const totals = new Map<string, number>();
  for (const [t, m, b] of row.totals as [string, string, number | string][]) totals.set(`${t}|${m}`, Number(b));
  return { fresh, totals };
}

/** Inserts the alert row; true when this call created it (the threshold was not alerted yet). */
export async function insertQuotaAlert(
  tx: Sql | TransactionSql,
  a: { tenantId: string; period: string; threshold: number; usageBytes: number; quotaMb: number; eventId: string },
): Promise<boolean> {
  const rows = await tx`
    INSERT INTO quota_alerts (tenant_id, billing_period, threshold, usage_bytes, quota_mb, event_id)
    VALUES (${a.tenantId}, ${a.period}, ${a.threshold}, ${a.usageBytes}, ${a.quotaMb}, ${a.eventId})
    ON CONFLICT DO NOTHING RETURNING 1 AS inserted`;
  return rows.length > 0;
}

export async function monthBytes(sql: Sql | TransactionSql, tenantId: string, month: string): Promise<number> {
  const [row] = await sql`SELECT total_bytes FROM usage_months WHERE tenant_id = ${tenantId} AND month = ${month}`;
  return row ? Number(row.total_bytes) : 0;
}

export interface MonthRow {
  month: string;
  totalOperations: number;
  totalImages: number;
  totalBytes: number;
  avgDurationMs: number;
}

export async function listMonths(sql: Sql | TransactionSql, tenantId: string, limit: number): Promise<MonthRow[]> {
  const rows = await sql`
    SELECT month, total_operations, total_images, total_bytes, duration_ms_sum, duration_count
    FROM usage_months
    WHERE tenant_id = ${tenantId} AND (total_operations > 0 OR total_images > 0 OR failed_operations > 0)
    ORDER BY month DESC LIMIT ${limit}`;
  return rows.map((r) => ({
    month: r.month as string,
    totalOperations: Number(r.total_operations),
    totalImages: Number(r.total_images),
    totalBytes: Number(r.total_bytes),
    avgDurationMs: Number(r.duration_count) > 0 ? Math.round(Number(r.duration_ms_sum) / Number(r.duration_count)) : 0,
  }));
}

/** Rolling 30 days (hour granularity): images and bytes stored. */
export async function recentUsage(sql: Sql | TransactionSql, tenantId: string): Promise<{ bytes: number; images: number }> {
  const [row] = await sql`
    SELECT coalesce(sum(bytes), 0) AS bytes, coalesce(sum(images), 0) AS images
    FROM usage_hours WHERE tenant_id = ${tenantId} AND hour >= date_trunc('hour', now() - interval '30 days')`;
  return { bytes: Number(row.bytes), images: Number(row.images) };
}

export async function platformUsage(sql: Sql) {
  const [totals] = await sql`
    SELECT coalesce(sum(total_images - deleted_images), 0) AS images, coalesce(sum(total_bytes - deleted_bytes), 0) AS bytes
    FROM usage_months`;
  const [last24] = await sql`
    SELECT coalesce(sum(images), 0) AS images, coalesce(sum(operations), 0) AS operations
    FROM usage_hours WHERE hour >= date_trunc('hour', now() - interval '24 hours')`;
  const top = await sql`
    SELECT tenant_id, total_bytes, total_images FROM usage_months
    WHERE month = ${currentMonth()} ORDER BY total_bytes DESC, tenant_id LIMIT 10`;
  return {
    totalImages: Math.max(0, Number(totals.images)),
    totalBytes: Math.max(0, Number(totals.bytes)),
    imagesLast24h: Number(last24.images),
    operationsLast24h: Number(last24.operations),
    topTenants: top.map((r) => ({ tenantId: r.tenant_id as string, bytes: Number(r.total_bytes), images: Number(r.total_images) })),
  };
}

/**
 * Retention: hour buckets older than 32 days (only the last 30 days are read) and dedupe rows older
 * than 14 days (JetStream keeps events 7 days, so no replay can bring them back).
 */
export async function pruneOld(sql: Sql, consumer: string): Promise<void> {
  await sql`DELETE FROM usage_hours WHERE hour < now() - interval '32 days'`;
  await sql`DELETE FROM processed_events WHERE consumer = ${consumer} AND processed_at < now() - interval '14 days'`;
}
