import type { TenantExport } from '@imagegen/contracts/tenancy/v1/tenancy';
import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import {
  bind,
  conflict,
  forbidden,
  type GrpcServiceBinding,
  invalidPayload,
  type Logger,
  notFound,
  type ObjectStorage,
  type Sql,
  tenantDataHandlers,
} from '@imagegen/platform';
import { randomId } from '../crypto.js';
import { type HandlerContext, normalizeTenantId, type TenancyHandlers, tenantNotFound } from './context.js';

/** A running export whose heartbeat is older than this died with its process: it is failed, never resumed. */
export const EXPORT_LEASE_MS = 120_000;
const STATUSES = new Set(['queued', 'running', 'completed', 'failed', 'expired']);

const exportNotFound = () => notFound('Export not found');

interface ExportRow {
  export_id: string;
  tenant_id: string;
  status: string;
  phase: string;
  items_done: string;
  items_total: string;
  size_bytes: string;
  object_key: string;
  error: string | null;
  requested_by: string;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  expires_at: Date | null;
}

function present(r: ExportRow): TenantExport {
  return {
    exportId: r.export_id,
    tenantId: r.tenant_id,
    status: r.status,
    phase: r.phase,
    itemsDone: Number(r.items_done),
    itemsTotal: Number(r.items_total),
    sizeBytes: Number(r.size_bytes),
    objectKey: r.object_key,
    error: r.error ?? undefined,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
    completedAt: r.completed_at?.toISOString(),
    expiresAt: r.expires_at?.toISOString(),
    requestedBy: r.requested_by,
  };
}

/** The export's tenant must be the caller itself, or the caller a super_admin. */
function mayExport(principal: { tenantId?: string; adminRole?: string }, tenantId: string): void {
  if (principal.adminRole === 'super_admin') return;
  if (principal.tenantId && principal.tenantId === tenantId && !principal.adminRole) return;
  throw forbidden('Insufficient permissions');
}

export function tenantDataJobHandlers(
  c: HandlerContext,
): Pick<TenancyHandlers, 'createTenantExport' | 'getTenantExport' | 'updateTenantExport' | 'beginTenantPurge' | 'recordTenantPurgeStep'> {
  const { sql } = c;
  return {
    async createTenantExport(req, ctx) {
      const tenantId = normalizeTenantId(req.tenantId);
      mayExport(ctx.principal, tenantId);
      const [t] = await sql<{ tenant_id: string }[]>`SELECT tenant_id FROM tenants WHERE tenant_id = ${tenantId}`;
      if (!t) throw tenantNotFound();
      const exportId = randomId('exp_');
      const [row] = await sql<ExportRow[]>`
        INSERT INTO tenant_exports (export_id, tenant_id, object_key, requested_by)
        VALUES (${exportId}, ${tenantId}, ${`tenants/${tenantId}/exports/${exportId}.zip`}, ${req.requestedBy})
        RETURNING *`;
      return present(row as ExportRow);
    },

    async getTenantExport(req, ctx) {
      const tenantId = normalizeTenantId(req.tenantId);
      mayExport(ctx.principal, tenantId);
      // A job whose heartbeat stopped (its process died) is failed here, so it is never reported as running forever.
      const [row] = await sql<ExportRow[]>`
        WITH stale AS (
          UPDATE tenant_exports SET status = 'failed', error = 'The export was interrupted (its process stopped); start a new one',
            updated_at = clock_timestamp()
          WHERE tenant_id = ${tenantId} AND export_id = ${req.exportId} AND status IN ('queued', 'running')
            AND updated_at < clock_timestamp() - make_interval(secs => ${EXPORT_LEASE_MS / 1000})
          RETURNING *
        )
        SELECT * FROM stale
        UNION ALL
        SELECT * FROM tenant_exports WHERE tenant_id = ${tenantId} AND export_id = ${req.exportId} AND NOT EXISTS (SELECT 1 FROM stale)`;
      if (!row) throw exportNotFound();
      // A completed ZIP past its keeping time reads as expired (its object is removed by the gateway's sweep).
      if (row.status === 'completed' && row.expires_at && row.expires_at.getTime() <= Date.now()) row.status = 'expired';
      return present(row);
    },

    async updateTenantExport(req, ctx) {
      const tenantId = normalizeTenantId(req.tenantId);
      mayExport(ctx.principal, tenantId);
      if (!STATUSES.has(req.status)) throw invalidPayload([`status must be one of ${[...STATUSES].join(', ')}`]);
      const done = req.status === 'completed';
      const keepDays = Math.max(req.keepDays || 0, 0);
      // Only a live job moves: a failed (interrupted) or completed export is never revived by a late writer.
      const [row] = await sql<ExportRow[]>`
        UPDATE tenant_exports SET status = ${req.status}, phase = ${req.phase || 'data'}, items_done = ${req.itemsDone},
          items_total = ${req.itemsTotal}, size_bytes = ${req.sizeBytes}, error = ${req.error ?? null},
          updated_at = clock_timestamp(),
          completed_at = ${done ? sql`clock_timestamp()` : null},
          expires_at = ${done ? sql`clock_timestamp() + make_interval(days => ${keepDays})` : null}
        WHERE tenant_id = ${tenantId} AND export_id = ${req.exportId}
          AND (status IN ('queued', 'running') OR (status = 'completed' AND ${req.status} = 'expired'))
        RETURNING *`;
      if (!row) {
        const [cur] = await sql<ExportRow[]>`SELECT * FROM tenant_exports WHERE tenant_id = ${tenantId} AND export_id = ${req.exportId}`;
        if (!cur) throw exportNotFound();
        throw conflict('The export is no longer running');
      }
      return present(row);
    },

    async beginTenantPurge(req, ctx) {
      if (ctx.principal.adminRole !== 'super_admin') throw forbidden('Insufficient permissions');
      const tenantId = normalizeTenantId(req.tenantId);
      const [t] = await sql<
        { tenant_id: string; tenant_name: string; is_active: boolean; purge_started_at: Date | null; purge_steps: unknown }[]
      >`SELECT tenant_id, tenant_name, is_active, purge_started_at, purge_steps FROM tenants WHERE tenant_id = ${tenantId}`;
      if (!t) throw tenantNotFound();
      if (t.is_active) throw conflict('Tenant must be deactivated before it is purged');
      const [row] = await sql<{ purge_started_at: Date; purge_steps: unknown }[]>`
        UPDATE tenants SET purge_started_at = coalesce(purge_started_at, clock_timestamp()), purge_steps = coalesce(purge_steps, '{}'::jsonb)
        WHERE tenant_id = ${tenantId} RETURNING purge_started_at, purge_steps`;
      return {
        tenantId,
        tenantName: t.tenant_name,
        startedAt: (row as { purge_started_at: Date }).purge_started_at.toISOString(),
        stepsJson: JSON.stringify(row?.purge_steps ?? {}),
      };
    },

    async recordTenantPurgeStep(req, ctx) {
      if (ctx.principal.adminRole !== 'super_admin') throw forbidden('Insufficient permissions');
      const tenantId = normalizeTenantId(req.tenantId);
      let result: unknown;
      try {
        result = JSON.parse(req.resultJson || '{}');
      } catch {
        throw invalidPayload(['result_json must be JSON']);
      }
      const [row] = await sql<{ tenant_name: string; purge_started_at: Date; purge_steps: unknown }[]>`
        UPDATE tenants SET purge_steps = coalesce(purge_steps, '{}'::jsonb) || jsonb_build_object(${req.step}::text, ${sql.json(result as never)}::jsonb)
        WHERE tenant_id = ${tenantId} AND purge_started_at IS NOT NULL
        RETURNING tenant_name, purge_started_at, purge_steps`;
      if (!row) throw tenantNotFound();
      return {
        tenantId,
        tenantName: row.tenant_name,
        startedAt: row.purge_started_at.toISOString(),
        stepsJson: JSON.stringify(row.purge_steps),
      };
    },
  };
}

/**
 * Tenancy's part of a tenant's export and purge: the tenant itself, its API keys (no hash, no signing secret),
 * its provider credential pools (only which providers and how many keys: never the encrypted keys) and its
 * exports. The purge removes them, and last the tenant row with its TenantChanged event in one transaction, so
 * every replica's caches drop the tenant (the path a deactivation takes). The audit log is kept.
 */
export function tenancyTenantData(c: HandlerContext): GrpcServiceBinding {
  const { sql } = c;
  return bind(
    TenantDataServiceService,
    tenantDataHandlers({
      sql,
      schema: 'tenancy',
      tables: [
        { name: 'tenants', key: [{ column: 'tenant_id', type: 'text' }], omit: ['purge_started_at', 'purge_steps'] },
        {
          name: 'api_keys',
          key: [
            { column: 'created_at', type: 'timestamptz' },
            { column: 'key_id', type: 'text' },
          ],
          omit: ['key_hash', 'signing_secret', 'previous_signing_secret'],
        },
        { name: 'provider_credentials', key: [{ column: 'provider', type: 'text' }], omit: ['encrypted'] },
        {
          name: 'tenant_exports',
          key: [
            { column: 'created_at', type: 'timestamptz' },
            { column: 'export_id', type: 'text' },
          ],
        },
      ],
      keep: ['audit_log', 'tenants'],
      // Rows that reference api_keys (ON DELETE CASCADE) go before them, so each is removed, and counted, by itself.
      purgeOrder: ['console_sessions'],
      async purgeLast(tenantId) {
        return sql.begin(async (tx) => {
          const r = await tx`DELETE FROM tenants WHERE tenant_id = ${tenantId}`;
          if (r.count > 0) await c.tenantChanged(tx, tenantId, 'purged');
          return { tenants: r.count };
        });
      },
    }),
  );
}

/**
 * The export ZIPs' retention (EXPORT_RETENTION_DAYS, set at completion as expires_at): removes the objects of
 * completed exports past their time and marks them expired. Hourly on each replica; idempotent.
 */
export async function sweepExpiredExports(sql: Sql, storage: ObjectStorage, logger: Logger): Promise<number> {
  let swept = 0;
  for (;;) {
    const page = await sql<{ export_id: string; object_key: string }[]>`
      SELECT export_id, object_key FROM tenant_exports WHERE status = 'completed' AND expires_at <= clock_timestamp()
      ORDER BY expires_at LIMIT 500`;
    if (page.length === 0) break;
    await storage.deleteMany(page.map((p) => p.object_key));
    swept += (
      await sql`UPDATE tenant_exports SET status = 'expired', updated_at = clock_timestamp()
        WHERE export_id = ANY(${page.map((p) => p.export_id)}) AND status = 'completed'`
    ).count;
  }
  if (swept) logger.info({ swept }, 'expired tenant exports removed');
  return swept;
}
