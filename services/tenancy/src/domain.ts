/**
 * Tenancy's domain objects: what the repositories (src/repositories) read from and write to the `tenancy`
 * schema, camelCased, with timestamps as Dates and absent values as null. The gRPC handlers map them to
 * proto messages (src/handlers/present.ts).
 */
import type { ADMIN_ROLES, API_KEY_TYPES, Provider } from '@imagegen/api-schemas/vocab';

export type KeyType = (typeof API_KEY_TYPES)[number];
export type AdminRole = (typeof ADMIN_ROLES)[number];

/** The role that may manage admin users; at least one active user keeps it. */
export const SUPER_ADMIN: AdminRole = 'super_admin';

export interface Tenant {
  tenantId: string;
  tenantName: string;
  isActive: boolean;
  contactEmail: string;
  monthlyQuotaMb: number;
  rateLimitPerMinute: number;
  notes: string | null;
  modelId: string;
  allowedModels: string[];
  /** Content Credentials (issue 39): the prompt goes into the images' signed manifests. */
  credentialsIncludePrompt: boolean;
  createdAt: Date;
  updatedAt: Date;
}

/** The columns of a tenant the platform statistics read. */
export interface TenantSummary {
  tenantId: string;
  tenantName: string;
  isActive: boolean;
  createdAt: Date;
}

/** An API key as stored: only its hash, and the prefix and suffix shown abbreviated (sk_live_AbCd...wXyZ). */
export interface ApiKey {
  keyId: string;
  tenantId: string;
  keyPrefix: string;
  keySuffix: string;
  keyName: string;
  type: KeyType;
  isActive: boolean;
  usageCount: number;
  lastUsedAt: Date | null;
  createdAt: Date;
  revokedAt: Date | null;
  /** Signed requests (SPEC 5.8, extension): every request with this key carries X-Signature and X-Timestamp. */
  signatureRequired: boolean;
  signingSecretCreatedAt: Date | null;
  /** Until when the previous (rotated) signing secret is still accepted; null when there is none. */
  previousSigningSecretExpiresAt: Date | null;
}

/** An active key found by its hash, with what the gateway needs of its tenant. */
export interface KeyAuthentication {
  keyId: string;
  tenantId: string;
  type: KeyType;
  keyName: string;
  tenantActive: boolean;
  rateLimitPerMinute: number;
  signatureRequired: boolean;
}

/** The signing secrets of a key that requires signed requests: the current one, and the previous one in its grace. */
export interface SigningSecrets {
  current: string;
  previous?: { secret: string; expiresAt: Date };
}

/** A tenant's pool of keys for one provider (the keys themselves stay encrypted). */
export interface ProviderPool {
  provider: Provider;
  keyCount: number;
}

export interface AdminUser {
  userId: string;
  email: string;
  displayName: string;
  role: AdminRole;
  isActive: boolean;
  passwordHash: string;
  failedLoginAttempts: number;
  lockedUntil: Date | null;
  lastLoginAt: Date | null;
  tenantId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The user of a live admin session. */
export interface SessionUser {
  userId: string;
  email: string;
  role: AdminRole;
  displayName: string;
  expiresAt: Date;
}

export interface Invitation {
  token: string;
  email: string;
  role: AdminRole;
  tenantId: string | null;
  invitedBy: string | null;
  expiresAt: Date;
  createdAt: Date;
  acceptedAt: Date | null;
  acceptedUserId: string | null;
  revokedAt: Date | null;
}

export type InvitationStatus = 'pending' | 'accepted' | 'revoked' | 'expired';

export function invitationStatus(inv: Invitation, now = Date.now()): InvitationStatus {
  if (inv.revokedAt) return 'revoked';
  if (inv.acceptedAt) return 'accepted';
  if (inv.expiresAt.getTime() <= now) return 'expired';
  return 'pending';
}

/** Locked after too many failed sign-ins, until locked_until passes or a super_admin unlocks the user. */
export function isLocked(user: Pick<AdminUser, 'lockedUntil'>, now = Date.now()): boolean {
  return user.lockedUntil != null && user.lockedUntil.getTime() > now;
}
