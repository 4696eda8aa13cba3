import type { Infer, TenantPurgeBody } from '@imagegen/api-schemas';
import type { TenantExport } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, badRequest, conflict, type Principal } from '@imagegen/platform';
import type { FastifyReply } from 'fastify';
import { createTenantDataClients } from '../tenant-data/clients.js';
import { runExport } from '../tenant-data/export.js';
import { runPurge } from '../tenant-data/purge.js';
import type { RouteModule } from '../types.js';

/**
 * A tenant's data (extension, issue 40, item 4): its export (the tenant itself at /api/exports, a super_admin at
 * /admin/tenants/:tenantId/exports) and its purge (a super_admin, after deactivation, with the tenant's id
 * repeated). The export is a background job of this replica (tenant-data/export.ts); the purge runs within the
 * request and is resumed by sending it again (tenant-data/purge.ts). Both are recorded in the audit log by its
 * hook (src/audit.ts): the purge's record carries what was removed.
 */

function exportJson(e: TenantExport, base: string) {
  const expired = e.status === 'expired';
  return {
    exportId: e.exportId,
    tenantId: e.tenantId,
    status: e.status as 'queued' | 'running' | 'completed' | 'failed' | 'expired',
    phase: e.phase as 'data' | 'files' | 'done',
    itemsDone: e.itemsDone,
    itemsTotal: e.itemsTotal,
    sizeBytes: e.sizeBytes,
    error: e.error ?? null,
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
    completedAt: e.completedAt ?? null,
    expiresAt: e.expiresAt ?? null,
    downloadUrl: e.status === 'completed' && !expired ? `${base}/${e.exportId}/download` : null,
  };
}

const tenantData: RouteModule = (app, { ctx, clients }) => {
  const data = createTenantDataClients(ctx);
  app.addHook('onClose', async () => {
    for (const c of Object.values(data)) c.close();
  });
  const keepDays = ctx.config.exportRetentionDays;
  const running = new Set<Promise<void>>();
  // A stopping gateway lets its exports end as they are: their rows fail by lease (never a partial ZIP).
  app.addHook('onClose', async () => {
    await Promise.race([Promise.allSettled([...running]), new Promise((r) => setTimeout(r, 1000).unref())]);
  });

  const requester = (p: Principal) => p.adminUserId ?? (p.adminRole ? 'admin-token' : `tenant:${p.tenantId ?? ''}`);

  const start = async (tenantId: string, principal: Principal, base: string, reply: FastifyReply) => {
    const job = await clients.tenancy.createTenantExport({ tenantId, requestedBy: requester(principal) }, principal);
    // The job outlives the request: its own principal (no request's deadline), the same identity.
    const jobPrincipal: Principal = { ...principal, requestId: `${principal.requestId}:export` };
    const run = runExport({ clients, data, storage: ctx.storage, logger: ctx.logger, keepDays }, job, jobPrincipal).finally(() =>
      running.delete(run),
    );
    running.add(run);
    reply.code(202).header('location', `${base}/${job.exportId}`);
    return { data: exportJson(job, base) };
  };

  const read = async (tenantId: string, exportId: string, principal: Principal, base: string) =>
    exportJson(await clients.tenancy.getTenantExport({ tenantId, exportId }, principal), base);

  const download = async (tenantId: string, exportId: string, principal: Principal, reply: FastifyReply) => {
    const e = await clients.tenancy.getTenantExport({ tenantId, exportId }, principal);
    if (e.status === 'expired') {
      // Past its keeping time: the ZIP is removed now if a sweep has not yet.
      await ctx.storage.delete(e.objectKey).catch(() => {});
      throw new AppError(410, { error: 'Export has expired' });
    }
    if (e.status !== 'completed') throw conflict('Export is not completed');
    const stream = await ctx.storage.getStream(e.objectKey);
    reply.header('content-type', 'application/zip');
    reply.header('content-length', String(e.sizeBytes));
    reply.header('content-disposition', `attachment; filename="${tenantId}-${exportId}.zip"`);
    return reply.send(stream);
  };

  // ---- the tenant itself ----
  app.post('/api/exports', async (req, reply) => start(req.principal.tenantId as string, req.principal, '/api/exports', reply));
  app.get<{ Params: { exportId: string } }>('/api/exports/:exportId', async (req) => ({
    data: await read(req.principal.tenantId as string, req.params.exportId, req.principal, '/api/exports'),
  }));
  app.get<{ Params: { exportId: string } }>('/api/exports/:exportId/download', async (req, reply) =>
    download(req.principal.tenantId as string, req.params.exportId, req.principal, reply),
  );

  // ---- a super_admin ----
  const adminBase = (tenantId: string) => `/admin/tenants/${encodeURIComponent(tenantId)}/exports`;
  app.post<{ Params: { tenantId: string } }>('/admin/tenants/:tenantId/exports', async (req, reply) => {
    const tenantId = req.params.tenantId.trim().toLowerCase();
    return start(tenantId, req.principal, adminBase(tenantId), reply);
  });
  app.get<{ Params: { tenantId: string; exportId: string } }>('/admin/tenants/:tenantId/exports/:exportId', async (req) => {
    const tenantId = req.params.tenantId.trim().toLowerCase();
    return { data: await read(tenantId, req.params.exportId, req.principal, adminBase(tenantId)) };
  });
  app.get<{ Params: { tenantId: string; exportId: string } }>('/admin/tenants/:tenantId/exports/:exportId/download', async (req, reply) =>
    download(req.params.tenantId.trim().toLowerCase(), req.params.exportId, req.principal, reply),
  );

  // ---- the purge ----
  app.post<{ Params: { tenantId: string }; Body: Infer<typeof TenantPurgeBody> }>('/admin/tenants/:tenantId/purge', async (req) => {
    const tenantId = req.params.tenantId.trim().toLowerCase();
    if (req.body.confirm.trim().toLowerCase() !== tenantId) {
      throw badRequest('Invalid request payload', ["confirm must repeat the tenant's id"]);
    }
    const result = await runPurge(
      {
        clients,
        data,
        storage: ctx.storage,
        config: ctx.config,
        logger: ctx.logger,
        resolveOAuth: () => ctx.resolve('oauth'),
      },
      tenantId,
      req.principal,
    );
    return { data: result };
  });
};

export default tenantData;
