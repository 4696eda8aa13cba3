/** Domain objects (src/domain.ts) as proto messages: timestamps as ISO strings, null as absent. */
import type * as pb from '@imagegen/contracts/tenancy/v1/tenancy';
import { abbreviateKey } from '../crypto.js';
import { type AdminUser, type ApiKey, type Invitation, invitationStatus, isLocked, type ProviderPool, type Tenant } from '../domain.js';

const isoOpt = (d: Date | null): string | undefined => d?.toISOString();

export function tenant(t: Tenant): pb.Tenant {
  return {
    tenantId: t.tenantId,
    tenantName: t.tenantName,
    isActive: t.isActive,
    contactEmail: t.contactEmail,
    monthlyQuotaMb: t.monthlyQuotaMb,
    rateLimitPerMinute: t.rateLimitPerMinute,
    notes: t.notes ?? undefined,
    modelId: t.modelId,
    allowedModels: t.allowedModels,
    credentialsIncludePrompt: t.credentialsIncludePrompt,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}

export function keyRecord(k: ApiKey): pb.ApiKeyRecord {
  return {
    keyId: k.keyId,
    apiKey: abbreviateKey(k.keyPrefix, k.keySuffix),
    keyName: k.keyName,
    type: k.type,
    isActive: k.isActive,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: isoOpt(k.lastUsedAt),
    usageCount: k.usageCount,
    revokedAt: isoOpt(k.revokedAt),
    signatureRequired: k.signatureRequired,
  };
}

/** A key's signing state; `secret` only in the answer that made it. */
export function keySigning(k: ApiKey, secret?: string): pb.ApiKeySigning {
  return {
    keyId: k.keyId,
    keyName: k.keyName,
    signatureRequired: k.signatureRequired,
    signingSecret: secret,
    secretCreatedAt: isoOpt(k.signingSecretCreatedAt),
    previousSecretExpiresAt: isoOpt(k.previousSigningSecretExpiresAt),
  };
}

export function providerPool(p: ProviderPool): pb.ProviderPoolInfo {
  return { provider: p.provider, keyCount: p.keyCount };
}

export function adminUser(u: AdminUser): pb.AdminUser {
  return {
    userId: u.userId,
    email: u.email,
    displayName: u.displayName,
    role: u.role,
    isActive: u.isActive,
    lastLoginAt: isoOpt(u.lastLoginAt),
    createdAt: u.createdAt.toISOString(),
    updatedAt: u.updatedAt.toISOString(),
    isLocked: isLocked(u),
    failedLoginAttempts: u.failedLoginAttempts,
    tenantId: u.tenantId ?? undefined,
  };
}

export function invitation(i: Invitation): pb.Invitation {
  return {
    token: i.token,
    email: i.email,
    tenantId: i.tenantId ?? undefined,
    role: i.role,
    expiresAt: i.expiresAt.toISOString(),
    createdAt: i.createdAt.toISOString(),
    status: invitationStatus(i),
    acceptedAt: isoOpt(i.acceptedAt),
    revokedAt: isoOpt(i.revokedAt),
    invitedBy: i.invitedBy ?? undefined,
  };
}
