import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import { bind, type GrpcServiceBinding, type Sql, tenantDataHandlers } from '@imagegen/platform';

/**
 * The webhook dispatcher's part of a tenant's export and purge (issue 40, item 4): endpoints without their
 * signing secret. The purge removes the deliveries (their attempts go with them, by the foreign key) before the
 * endpoints, so each table's count is its own.
 */
export function webhooksTenantData(sql: Sql): GrpcServiceBinding {
  return bind(
    TenantDataServiceService,
    tenantDataHandlers({
      sql,
      schema: 'webhooks',
      tables: [{ name: 'endpoints', key: [{ column: 'id', type: 'bigint' }], omit: ['secret'] }],
      purgeOrder: ['deliveries', 'endpoints'],
    }),
  );
}
