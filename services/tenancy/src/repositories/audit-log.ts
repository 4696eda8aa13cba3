/**
 * The `audit_log` table (issue 40, item 5): append-only. insertAuditRecord and listAuditLog are the only ways in
 * and out; sweepAuditLog, the retention sweep, is the only delete (the table's trigger refuses any other).
 */
import type { Sql } from '@imagegen/platform';
import type { Db } from './db.js';

export type AuditActorType = 'admin_user' | 'admin_token' | 'tenant' | 'anonymous';

export interface AuditRecord {
  id: string;
  at: Date;
  actorType: AuditActorType;
  actor: string;
  actorRole: string | null;
  action: string;
  tenantId: string | null;
  resourceId: string | null;
  requestId: string;
  source: string;
  changes: Record<string, unknown>;
}

interface AuditRow {
  id: number;
  at: Date;
  actor_type: AuditActorType;
  actor: string;
  actor_role: string | null;
  action: string;
  tenant_id: string | null;
  resource_id: string | null;
  request_id: string;
  source: string;
  changes: Record<string, unknown>;
}

function toRecord(r: AuditRow): AuditRecord {
  return {
    id: String(r.id),
    at: r.at,
    actorType: r.actor_type,
    actor: r.actor,
    actorRole: r.actor_role,
    action: r.action,
    tenantId: r.tenant_id,
    resourceId: r.resource_id,
    requestId: r.request_id,
    source: r.source,
    changes: r.changes,
  };
}

export type NewAuditRecord = Omit<AuditRecord, 'id' | 'at'>;

export async function insertAuditRecord(db: Db, r: NewAuditRecord): Promise<AuditRecord> {
  const [row] = await db<AuditRow[]>`
    INSERT INTO audit_log (actor_type, actor, actor_role, action, tenant_id, resource_id, request_id, source, changes)
    VALUES (${r.actorType}, ${r.actor}, ${r.actorRole}, ${r.action}, ${r.tenantId}, ${r.resourceId}, ${r.requestId},
      ${r.source}, ${db.json(r.changes as never)})
    RETURNING id, at, actor_type, actor, actor_role, action, tenant_id, resource_id, request_id, source, changes`;
  return toRecord(row);
}

export interface AuditFilter {
  actor?: string;
  tenantId?: string;
  action?: string;
  /** Inclusive. */
  from?: Date;
  /** Exclusive. */
  to?: Date;
  /** Continue after this record (the last of the previous page). */
  after?: { at: Date; id: string };
}

/**
 * Newest first, keyset on (at, id): `limit + 1` rows are read to know whether a next page exists. Each filter has
 * an index led by its column and followed by (at DESC, id DESC), so a page reads one index range in order whatever
 * the table's size (checked with EXPLAIN on 1,000,000 rows: docs/design/admin.md).
 */
export async function listAuditLog(db: Db, f: AuditFilter, limit: number): Promise<{ records: AuditRecord[]; hasMore: boolean }> {
  const conds = [db`true`];
  if (f.actor !== undefined) conds.push(db`actor = ${f.actor}`);
  if (f.tenantId !== undefined) conds.push(db`tenant_id = ${f.tenantId}`);
  if (f.action !== undefined) conds.push(db`action = ${f.action}`);
  if (f.from) conds.push(db`at >= ${f.from}`);
  if (f.to) conds.push(db`at < ${f.to}`);
  if (f.after) conds.push(db`(at, id) < (${f.after.at}, ${f.after.id}::bigint)`);
  const where = conds.reduce((acc, c) => db`${acc} AND ${c}`);
  // `id` stays a bigint in the select list: ORDER BY names an output column first, and with `id::text` there,
  // records of one millisecond were ordered as text ('9' after '10'), which the keyset then skipped.
  const rows = await db<AuditRow[]>`
    SELECT id, at, actor_type, actor, actor_role, action, tenant_id, resource_id, request_id, source, changes
    FROM audit_log WHERE ${where}
    ORDER BY at DESC, id DESC
    LIMIT ${limit + 1}`;
  return { records: rows.slice(0, limit).map(toRecord), hasMore: rows.length > limit };
}

/**
 * The retention sweep: deletes records older than `days` days, at most `batch` per call (oldest first, so a long
 * backlog is worked off in bounded transactions; `= ANY(ARRAY(...))` deletes by primary key, never scanning the table). The setting lets this transaction past the append-only trigger.
 */
export async function sweepAuditLog(sql: Sql, days: number, batch = 10_000): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`SELECT set_config('imagegen.audit_sweep', 'on', true)`;
    const r = await tx`
      DELETE FROM audit_log WHERE id = ANY(ARRAY(
        SELECT id FROM audit_log WHERE at < now() - ${`${days} days`}::interval ORDER BY at LIMIT ${batch}))`;
    return r.count;
  }) as Promise<number>;
}
