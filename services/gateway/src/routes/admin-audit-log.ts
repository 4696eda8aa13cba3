import type { AuditLogQuery, Infer } from '@imagegen/api-schemas';
import { auditRecordJson } from '@imagegen/operations';
import type { RouteModule } from '../types.js';

/**
 * GET /admin/audit-log (issue 40, item 5; any admin): the audit records, newest first, filtered by actor, tenant,
 * action and time range, keyset-paged (pagination.nextCursor). The records are written by the audit hook
 * (src/audit.ts) and by the oauth service; nothing here or anywhere else changes or deletes one.
 */
const adminAuditLog: RouteModule = (app, { clients }) => {
  app.get<{ Querystring: Infer<typeof AuditLogQuery> }>('/admin/audit-log', async (req) => {
    const q = req.query;
    const r = await clients.tenancy.listAuditLog(
      { actor: q.actor, tenantId: q.tenant, action: q.action, from: q.from, to: q.to, limit: q.limit, cursor: q.cursor },
      req.principal,
    );
    return {
      data: r.records.map(auditRecordJson),
      pagination: { limit: q.limit, hasMore: r.nextCursor !== undefined, nextCursor: r.nextCursor ?? null },
    };
  });
};

export default adminAuditLog;
