import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import { bind, type GrpcServiceBinding, type Sql, tenantDataHandlers } from '@imagegen/platform';

/**
 * Generation's part of a tenant's export and purge (issue 40, item 4): executions with their logs. The queued
 * job's request and principal are internal (job_request, job_principal) and not exported. The purge removes
 * each page of executions with their logs, so each table's count is its own (not hidden in a cascade).
 */
export function generationTenantData(sql: Sql): GrpcServiceBinding {
  return bind(
    TenantDataServiceService,
    tenantDataHandlers({
      sql,
      schema: 'generation',
      tables: [
        {
          name: 'executions',
          key: [{ column: 'execution_id', type: 'text' }],
          omit: ['job_request', 'job_principal', 'instance_id'],
          extra: {
            logs: `(SELECT coalesce(jsonb_agg(jsonb_build_object('logged_at', l.logged_at, 'level', l.level, 'message', l.message) ORDER BY l.id), '[]'::jsonb) FROM generation.execution_logs l WHERE l.execution_id = t.execution_id)`,
          },
        },
      ],
      // Logs through their executions' ids (index execution_logs_execution), not a scan of every tenant's logs.
      cascaded: ['execution_logs'],
      purgeFirst: [
        async (tenantId) => {
          let logs = 0;
          let executions = 0;
          for (;;) {
            const page = await sql<{ execution_id: string }[]>`
              SELECT execution_id FROM executions WHERE tenant_id = ${tenantId} ORDER BY execution_id LIMIT 500`;
            if (page.length === 0) break;
            const ids = page.map((p) => p.execution_id);
            await sql.begin(async (tx) => {
              logs += (await tx`DELETE FROM execution_logs WHERE execution_id = ANY(${ids})`).count;
              executions += (await tx`DELETE FROM executions WHERE tenant_id = ${tenantId} AND execution_id = ANY(${ids})`).count;
            });
          }
          return { rows: { execution_logs: logs, executions }, objects: 0 };
        },
      ],
    }),
  );
}
