import { PROVIDERS, type Provider } from '@imagegen/api-schemas/vocab';
import {
  type GetImageDataResponse,
  type GetObjectDataResponse,
  type ImageRecord,
  LibraryServiceService,
  type SessionInfo,
  type StoreImageRequest,
} from '@imagegen/contracts/library/v1/library';
import { TenancyServiceService, type Tenant } from '@imagegen/contracts/tenancy/v1/tenancy';
import { type CheckQuotaResponse, UsageServiceService } from '@imagegen/contracts/usage/v1/usage';
import { type Client, createClient, type Principal, type ServiceContext, TtlCache } from '@imagegen/platform';

/**
 * What generation needs from the other services, behind one interface so service tests can run the
 * pipeline against fakes; in the stack every call is the real gRPC client (docs/CONTRACTS.md).
 */
export interface Collaborators {
  getTenant(
    p: Principal,
    tenantId: string,
  ): Promise<Pick<Tenant, 'tenantId' | 'isActive' | 'modelId' | 'allowedModels' | 'credentialsIncludePrompt'>>;
  getProviderKeys(p: Principal, tenantId: string, provider: Provider): Promise<string[]>;
  checkQuota(p: Principal, tenantId: string, incomingBytes: number): Promise<Pick<CheckQuotaResponse, 'allowed'>>;
  touchSession(p: Principal, tenantId: string, sessionId: string): Promise<Pick<SessionInfo, 'remaining'>>;
  storeImage(p: Principal, req: StoreImageRequest): Promise<ImageRecord>;
  /** Lists and bills the pending images of a completed execution (idempotent; the library's event consumer does it too). */
  commitExecutionImages(p: Principal, tenantId: string, executionId: string, imageIds: number[]): Promise<void>;
  getImageData(p: Principal, imageId: number): Promise<GetImageDataResponse>;
  getObjectData(p: Principal, objectKey: string): Promise<GetObjectDataResponse>;
  /** Session known to the library (404 'Session not found' otherwise). */
  sessionExists(p: Principal, sessionId: string): Promise<boolean>;
  close(): void;
}

const STORE_TIMEOUT_MS = 120_000;

export function grpcCollaborators(ctx: ServiceContext): Collaborators {
  const tenancy: Client<typeof TenancyServiceService> = createClient(TenancyServiceService, () => ctx.resolve('tenancy'));
  const library: Client<typeof LibraryServiceService> = createClient(LibraryServiceService, () => ctx.resolve('library'));
  const usage: Client<typeof UsageServiceService> = createClient(UsageServiceService, () => ctx.resolve('usage'));
  return {
    getTenant: (p, tenantId) => tenancy.getTenant({ tenantId }, p),
    getProviderKeys: async (p, tenantId, provider) => (await tenancy.getProviderCredentials({ tenantId, provider }, p)).keys,
    checkQuota: (p, tenantId, incomingBytes) => usage.checkQuota({ tenantId, incomingBytes }, p),
    touchSession: (p, tenantId, sessionId) => library.touchSession({ tenantId, sessionId }, p),
    storeImage: (p, req) => library.storeImage(req, p, { timeoutMs: STORE_TIMEOUT_MS }),
    commitExecutionImages: async (p, tenantId, executionId, imageIds) => {
      await library.commitExecutionImages({ tenantId, executionId, imageIds }, p);
    },
    getImageData: (p, imageId) => library.getImageData({ imageId }, p),
    getObjectData: (p, objectKey) => library.getObjectData({ objectKey }, p),
    sessionExists: async (p, sessionId) => {
      try {
        await library.getSession({ sessionId, asJson: false, sessionOnly: true }, p);
        return true;
      } catch (err) {
        if ((err as { status?: number }).status === 404) return false;
        throw err;
      }
    },
    close: () => {
      tenancy.close();
      library.close();
      usage.close();
    },
  };
}

/**
 * The tenant and its provider keys, read on every generation, kept `ttlMs` (API_KEY_CACHE_TTL_MS, 3 s): the
 * gateway's API-key cache already lets a deactivation apply that late, and a model or key change made by an
 * admin applies within the same bound (at once where tenancy's TenantChanged reaches `invalidate`). Saves two
 * gRPC calls (and their SQL) per request, one of them ahead of everything else. Quota checks, sessions and
 * stores are never cached.
 */
export function withTenantCache(c: Collaborators, ttlMs: number): Collaborators & { invalidate(tenantId: string): void } {
  const tenants = new TtlCache<string, Awaited<ReturnType<Collaborators['getTenant']>>>(ttlMs);
  const keys = new TtlCache<string, string[]>(ttlMs);
  const keyOf = (tenantId: string, provider: Provider) => `${tenantId}\0${provider}`;
  return {
    ...c,
    getTenant: (p, tenantId) => tenants.get(tenantId, () => c.getTenant(p, tenantId)),
    getProviderKeys: (p, tenantId, provider) => keys.get(keyOf(tenantId, provider), () => c.getProviderKeys(p, tenantId, provider)),
    invalidate(tenantId) {
      tenants.invalidate(tenantId);
      for (const provider of PROVIDERS) keys.invalidate(keyOf(tenantId, provider));
    },
  };
}
