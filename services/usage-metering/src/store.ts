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

export interface UsageDelta {
  tenantId: string;
  at: Date;
  operations?: number;
  failedOperations?: number;
  images?: number;
  bytes?: number;
  durationMs?: number;
  durationCount?: number;
}

/**
 * Adds a delta to the tenant's month and hour buckets in one statement; returns the month's
 * total_bytes after the update (the row stays locked until the transaction ends, so concurrent
 * updates of the same tenant serialize and each sees its own total).
 */
export async function addUsage(tx: TransactionSql, d: UsageDelta): Promise<number> {
  const month = d.at.toISOString().slice(0, 7);
  const hour = new Date(Math.floor(d.at.getTime() / 3_600_000) * 3_600_000);
  const ops = d.operations ?? 0;
  const failed = d.failedOperations ?? 0;
  const images = d.images ?? 0;
  const bytes = d.bytes ?? 0;
  const dur = d.durationMs ?? 0;
  const durCount = d.durationCount ?? 0;
  const [row] = await tx`
    WITH m AS (
      INSERT INTO usage_months AS u (tenant_id, month, total_operations, failed_operations, total_images, total_bytes,
        duration_ms_sum, duration_count, updated_at)
      VALUES (${d.tenantId}, ${month}, ${ops}, ${failed}, ${images}, ${bytes}, ${dur}, ${durCount}, now())
      ON CONFLICT (tenant_id, month) DO UPDATE SET
        total_operations = u.total_operations + EXCLUDED.total_operations,
        failed_operations = u.failed_operations + EXCLUDED.failed_operations,
        total_images = u.total_images + EXCLUDED.total_images,
        total_bytes = u.total_bytes + EXCLUDED.total_bytes,
        duration_ms_sum = u.duration_ms_sum + EXCLUDED.duration_ms_sum,
        duration_count = u.duration_count + EXCLUDED.duration_count,
        updated_at = now()
      RETURNING u.total_bytes
    ), h AS (
      INSERT INTO usage_hours AS h (tenant_id, hour, operations, images, bytes)
      VALUES (${d.tenantId}, ${hour}, ${ops}, ${images}, ${bytes})
      ON CONFLICT (tenant_id, hour) DO UPDATE SET
        operations = h.operations + EXCLUDED.operations,
        images = h.images + EXCLUDED.images,
        bytes = h.bytes + EXCLUDED.bytes
      RETURNING 1
    )
    SELECT (SELECT total_bytes FROM m) AS total_bytes, (SELECT count(*) FROM h) AS h`;
  return Number(row.total_bytes);
}

/** Deletes are recorded on the month the image was billed to; they never reduce total_bytes. */
export async function recordDelete(tx: TransactionSql, tenantId: string, month: string, bytes: number): Promise<void> {
  await tx`
    INSERT INTO usage_months AS u (tenant_id, month, deleted_images, deleted_bytes, updated_at)
    VALUES (${tenantId}, ${month}, 1, ${bytes}, now())
    ON CONFLICT (tenant_id, month) DO UPDATE SET
      deleted_images = u.deleted_images + 1,
      deleted_bytes = u.deleted_bytes + EXCLUDED.deleted_bytes,
      updated_at = now()`;
}

/** Inserts the alert row; true when this call created it (the threshold was not alerted yet). */
export async function insertQuotaAlert(
  tx: TransactionSql,
  a: { tenantId: string; period: string; threshold: number; usageBytes: number; quotaMb: number; eventId: string },
): Promise<boolean> {
  const rows = await tx`
    INSERT INTO quota_alerts (tenant_id, billing_period, threshold, usage_bytes, quota_mb, event_id)
    VALUES (${a.tenantId}, ${a.period}, ${a.threshold}, ${a.usageBytes}, ${a.quotaMb}, ${a.eventId})
    ON CONFLICT DO NOTHING RETURNING 1 AS inserted`;
  return rows.length > 0;
}

export async function alertedThresholds(sql: Sql, tenantId: string, period: string): Promise<number[]> {
  const rows = await sql`SELECT threshold FROM quota_alerts WHERE tenant_id = ${tenantId} AND billing_period = ${period}`;
  return rows.map((r) => Number(r.threshold));
}

export async function monthBytes(sql: Sql, tenantId: string, month: string): Promise<number> {
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

export async function listMonths(sql: Sql, tenantId: string, limit: number): Promise<MonthRow[]> {
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
export async function recentUsage(sql: Sql, tenantId: string): Promise<{ bytes: number; images: number }> {
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
