import { TenantDataServiceService } from '@imagegen/contracts/tenantdata/v1/tenant_data';
import { type Client, createClient, type ServiceContext, type ServiceName } from '@imagegen/platform';

/** The services that keep rows of a tenant, each serving TenantDataService beside its own (issue 40, item 4). */
export const TENANT_DATA_SERVICES = ['tenancy', 'library', 'generation', 'usage', 'webhooks'] as const satisfies readonly ServiceName[];
export type TenantDataServiceName = (typeof TENANT_DATA_SERVICES)[number];
export type TenantDataClient = Client<typeof TenantDataServiceService>;
export type TenantDataClients = Record<TenantDataServiceName, TenantDataClient>;

export function createTenantDataClients(ctx: Pick<ServiceContext, 'resolve'>): TenantDataClients {
  return Object.fromEntries(
    TENANT_DATA_SERVICES.map((name) => [name, createClient(TenantDataServiceService, () => ctx.resolve(name))]),
  ) as TenantDataClients;
}
