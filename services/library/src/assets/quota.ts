import { UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import { type CallContext, createClient, quotaExceeded, type ServiceContext } from '@imagegen/platform';

export interface QuotaGuard {
  /** Throws 402 QUOTA_EXCEEDED when storing `incomingBytes` more would exceed the tenant's monthly quota. */
  check(tenantId: string, incomingBytes: number, call: CallContext): Promise<void>;
  close(): void;
}

/** Asks the usage service (CheckQuota) before product images or scene URL imports are stored. */
export function createQuotaGuard(ctx: ServiceContext): QuotaGuard {
  const client = createClient(UsageServiceService, () => ctx.resolve('usage'));
  return {
    async check(tenantId, incomingBytes, call) {
      const res = await client.checkQuota({ tenantId, incomingBytes }, { ...call.principal, tenantId });
      if (!res.allowed) throw quotaExceeded();
    },
    close: () => client.close(),
  };
}
