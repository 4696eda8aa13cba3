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
      // Deliveries through their endpoints (index deliveries_endpoint), their attempts by the foreign key's cascade.
      cascaded: ['deliveries'],
      purgeFirst: [
        async (tenantId) => {
          let deliveries = 0;
          let endpoints = 0;
          for (const e of await sql<{ id: string }[]>`SELECT id FROM endpoints WHERE tenant_id = ${tenantId} ORDER BY id`) {
            await sql.begin(async (tx) => {
              deliveries += (await tx`DELETE FROM deliveries WHERE endpoint_id = ${e.id}`).count;
              endpoints += (await tx`DELETE FROM endpoints WHERE tenant_id = ${tenantId} AND id = ${e.id}`).count;
            });
          }
          return { rows: { deliveries, endpoints }, objects: 0 };
        },
      ],
    }),
  );
}
