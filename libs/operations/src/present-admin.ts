import type * as Api from '@imagegen/api-schemas';
import type {
  AdminUser,
  ApiKeyRecord,
  ApiKeySigning,
  AuditRecord,
  Invitation,
  Tenant,
  TenantDetail,
} from '@imagegen/contracts/tenancy/v1/tenancy';
import type { Delivery } from '@imagegen/contracts/webhooks/v1/webhooks';
import type { z } from 'zod';

/** The JSON type of a resource schema of @imagegen/api-schemas. */
type Json<K extends keyof typeof Api> = (typeof Api)[K] extends z.ZodTypeAny ? z.infer<(typeof Api)[K]> : never;

/**
 * The JSON forms of the administration resources (tenants, API keys, admin users, invitations) and of webhook
 * deliveries, each typed against its schema in @imagegen/api-schemas (resources.ts), as present.ts does for the
 * tenant resources.
 */

export function tenantJson(t: Tenant | undefined): Json<'Tenant'> | null {
  if (!t) return null;
  return {
    tenantId: t.tenantId,
    tenantName: t.tenantName,
    isActive: t.isActive,
    contactEmail: t.contactEmail,
    monthlyQuotaMb: t.monthlyQuotaMb,
    rateLimitPerMinute: t.rateLimitPerMinute,
    notes: t.notes ?? null,
    modelId: t.modelId,
    allowedModels: t.allowedModels,
    credentialsIncludePrompt: t.credentialsIncludePrompt,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
  };
}

export function keyJson(k: ApiKeyRecord): Json<'ApiKeyRecord'> {
  return {
    keyId: k.keyId,
    apiKey: k.apiKey,
    keyName: k.keyName,
    type: k.type as Json<'ApiKeyRecord'>['type'],
    isActive: k.isActive,
    createdAt: k.createdAt,
    lastUsedAt: k.lastUsedAt ?? null,
    usageCount: k.usageCount,
    revokedAt: k.revokedAt ?? null,
    signatureRequired: k.signatureRequired,
  };
}

/** A key's signed-request state; the secret only in the answer that made it. */
export function keySigningJson(k: ApiKeySigning): Json<'ApiKeySigning'> {
  return {
    keyId: k.keyId,
    keyName: k.keyName,
    signatureRequired: k.signatureRequired,
    signingSecret: k.signingSecret ?? null,
    secretCreatedAt: k.secretCreatedAt ?? null,
    previousSecretExpiresAt: k.previousSecretExpiresAt ?? null,
  };
}

/** GET/PATCH tenant detail: {tenant, apiKeys, providerCredentials} (credentials: counts only, never keys). */
export function tenantDetailJson(d: TenantDetail): Json<'TenantDetail'> {
  const pool = (p: string) => {
    const info = d.providers.find((x) => x.provider === p);
    return { configured: !!info, keyCount: info?.keyCount ?? 0 };
  };
  return {
    tenant: tenantJson(d.tenant) as Json<'Tenant'>,
    apiKeys: d.apiKeys.map(keyJson),
    providerCredentials: { provA: pool('provA'), provB: pool('provB') },
  };
}

/** Admin user record (SPEC 2) plus lock state and timestamps. */
export function adminUserJson(u: AdminUser | undefined): Json<'AdminUser'> | null {
  if (!u) return null;
  return {
    userId: u.userId,
    email: u.email,
    displayName: u.displayName,
    role: u.role as Json<'AdminUser'>['role'],
    isActive: u.isActive,
    lastLoginAt: u.lastLoginAt ?? null,
    isLocked: u.isLocked,
    failedLoginAttempts: u.failedLoginAttempts,
    tenantId: u.tenantId ?? null,
    createdAt: u.createdAt,
    updatedAt: u.updatedAt,
  };
}

/**
 * A pending invitation's token is a credential: whoever holds it chooses the password of the account it
 * creates, with the invited role. Only a super_admin (who may create invitations anyway) sees tokens in
 * full; an admin sees them abbreviated, like API keys (otherwise an admin could accept a pending
 * super_admin invitation and become super_admin).
 */
export function abbreviateInvitationToken(token: string): string {
  return token.length > 12 ? `${token.slice(0, 8)}...${token.slice(-4)}` : 'inv_...';
}

export function invitationJson(i: Invitation, showToken = true): Json<'Invitation'> {
  return {
    token: showToken ? i.token : abbreviateInvitationToken(i.token),
    email: i.email,
    tenantId: i.tenantId ?? null,
    role: i.role as Json<'Invitation'>['role'],
    status: i.status,
    expiresAt: i.expiresAt,
    createdAt: i.createdAt,
    acceptedAt: i.acceptedAt ?? null,
    revokedAt: i.revokedAt ?? null,
    invitedBy: i.invitedBy ?? null,
  };
}

/** An audit log record (GET /admin/audit-log). */
export function auditRecordJson(r: AuditRecord): Json<'AuditRecord'> {
  let changes: Record<string, unknown> = {};
  try {
    changes = JSON.parse(r.changesJson || '{}');
  } catch {
    // stored as a JSON object by RecordAudit; an unreadable one is shown empty
  }
  return {
    id: r.id,
    at: r.at,
    actorType: r.actorType as Json<'AuditRecord'>['actorType'],
    actor: r.actor,
    actorRole: r.actorRole ?? null,
    action: r.action,
    tenantId: r.tenantId ?? null,
    resourceId: r.resourceId ?? null,
    requestId: r.requestId,
    changes,
  };
}

export function deliveryForm(d: Delivery): Json<'Delivery'> {
  // The stored payload is the JSON the endpoint was sent (one of the webhook payloads); kept as text if it is not JSON.
  let payload: Json<'Delivery'>['payload'];
  try {
    payload = JSON.parse(d.payload);
  } catch {
    payload = d.payload as unknown as Json<'Delivery'>['payload'];
  }
  return {
    id: d.id,
    webhookId: d.webhookId,
    event: d.event,
    eventId: d.eventId,
    replayOf: d.replayOf ?? null,
    status: d.status,
    attemptCount: d.attemptCount,
    nextAttemptAt: d.nextAttemptAt ?? null,
    lastResponseStatus: d.lastResponseStatus ?? null,
    lastError: d.lastError ?? null,
    payload,
    createdAt: d.createdAt,
    completedAt: d.completedAt ?? null,
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      responseStatus: a.responseStatus ?? null,
      error: a.error ?? null,
      durationMs: a.durationMs,
      attemptedAt: a.attemptedAt,
    })),
  };
}
