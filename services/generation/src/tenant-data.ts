import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import { bind, type GrpcServiceBinding, type Sql, tenantDataHandlers } from '@imagegen/platform';

/**
 * Generation's part of a tenant's export and purge (issue 40, item 4): executions with their logs. The queued
 * job's request and principal are internal (job_request, job_principal) and not exported. The purge removes
 * the logs before their executions, so each table's count is its own (not hidden in a cascade).
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
      purgeOrder: ['execution_logs', 'executions'],
    }),
  );
}
