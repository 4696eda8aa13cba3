import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import { bind, type GrpcServiceBinding, type Sql, tenantDataHandlers } from '@imagegen/platform';

/**
 * Usage's part of a tenant's export and purge (issue 40, item 4): months, hours and quota alerts, each paged on
 * its primary key (tenant_id first). The purge keeps no billing total: the export carries them, and the purge's
 * audit record names what was removed.
 */
export function usageTenantData(sql: Sql): GrpcServiceBinding {
  return bind(
    TenantDataServiceService,
    tenantDataHandlers({
      sql,
      schema: 'usage',
      tables: [
        { name: 'usage_months', key: [{ column: 'month', type: 'text' }] },
        { name: 'usage_hours', key: [{ column: 'hour', type: 'timestamptz' }] },
        {
          name: 'quota_alerts',
          key: [
            { column: 'billing_period', type: 'text' },
            { column: 'threshold', type: 'int' },
          ],
        },
      ],
    }),
  );
}
