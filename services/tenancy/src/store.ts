import type { AdminUser, ApiKeyRecord, Invitation, Tenant } from '@imagegen/contracts/tenancy/v1/tenancy';
import type { Sql, TransactionSql } from '@imagegen/platform';
import { abbreviateKey } from './crypto.js';

type Db = Sql | TransactionSql;
type Row = Record<string, any>;

const iso = (d: unknown): string => (d instanceof Date ? d.toISOString() : String(d));
const isoOpt = (d: unknown): string | undefined => (d == null ? undefined : iso(d));

export function toTenant(r: Row): Tenant {
  return {
    tenantId: r.tenant_id,
    tenantName: r.tenant_name,
    isActive: r.is_active,
    contactEmail: r.contact_email,
    monthlyQuotaMb: r.monthly_quota_mb,
    rateLimitPerMinute: r.rate_limit_per_minute,
    notes: r.notes ?? undefined,
    modelId: r.model_id,
    allowedModels: r.allowed_models ?? [],
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}

export function toKeyRecord(r: Row): ApiKeyRecord {
  return {
    keyId: r.key_id,
    apiKey: abbreviateKey(r.key_prefix, r.key_suffix),
    keyName: r.key_name,
    type: r.type,
    isActive: r.is_active,
    createdAt: iso(r.created_at),
    lastUsedAt: isoOpt(r.last_used_at),
    usageCount: Number(r.usage_count),
    revokedAt: isoOpt(r.revoked_at),
  };
}

export function toAdminUser(r: Row): AdminUser {
  return {
    userId: r.user_id,
    email: r.email,
    displayName: r.display_name,
    role: r.role,
    isActive: r.is_active,
    lastLoginAt: isoOpt(r.last_login_at),
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
    isLocked: r.locked_until != null && new Date(r.locked_until).getTime() > Date.now(),
    failedLoginAttempts: r.failed_login_attempts,
    tenantId: r.tenant_id ?? undefined,
  };
}

export function invitationStatus(r: Row, now = Date.now()): string {
  if (r.revoked_at) return 'revoked';
  if (r.accepted_at) return 'accepted';
  if (new Date(r.expires_at).getTime() <= now) return 'expired';
  return 'pending';
}

export function toInvitation(r: Row): Invitation {
  return {
    token: r.token,
    email: r.email,
    tenantId: r.tenant_id ?? undefined,
    role: r.role,
    expiresAt: iso(r.expires_at),
    createdAt: iso(r.created_at),
    status: invitationStatus(r),
    acceptedAt: isoOpt(r.accepted_at),
    revokedAt: isoOpt(r.revoked_at),
    invitedBy: r.invited_by ?? undefined,
  };
}

// ---- tenants ----

export async function findTenant(db: Db, tenantId: string, forUpdate = false): Promise<Row | undefined> {
  const rows = forUpdate
    ? await db`SELECT * FROM tenants WHERE tenant_id = ${tenantId} FOR UPDATE`
    : await db`SELECT * FROM tenants WHERE tenant_id = ${tenantId}`;
  return rows[0];
}

export async function listTenants(db: Db): Promise<Row[]> {
  return db`SELECT * FROM tenants ORDER BY created_at, tenant_id`;
}

export async function listKeys(db: Db, tenantId: string): Promise<Row[]> {
  return db`SELECT * FROM api_keys WHERE tenant_id = ${tenantId} ORDER BY created_at, key_id`;
}

export async function providerPools(db: Db, tenantId: string): Promise<Row[]> {
  return db`SELECT provider, key_count FROM provider_credentials WHERE tenant_id = ${tenantId} ORDER BY provider`;
}

export async function insertKey(
  db: Db,
  k: { keyId: string; tenantId: string; hash: string; prefix: string; suffix: string; name: string; type: string },
): Promise<Row> {
  const [row] = await db`
    INSERT INTO api_keys (key_id, tenant_id, key_hash, key_prefix, key_suffix, key_name, type, created_at)
    VALUES (${k.keyId}, ${k.tenantId}, ${k.hash}, ${k.prefix}, ${k.suffix}, ${k.name}, ${k.type}, clock_timestamp())
    RETURNING *`;
  return row;
}

export async function upsertPool(db: Db, tenantId: string, provider: string, encrypted: Buffer, count: number) {
  await db`
    INSERT INTO provider_credentials (tenant_id, provider, encrypted, key_count)
    VALUES (${tenantId}, ${provider}, ${encrypted}, ${count})
    ON CONFLICT (tenant_id, provider) DO UPDATE SET encrypted = EXCLUDED.encrypted, key_count = EXCLUDED.key_count, updated_at = now()`;
}

export async function deletePool(db: Db, tenantId: string, provider: string) {
  await db`DELETE FROM provider_credentials WHERE tenant_id = ${tenantId} AND provider = ${provider}`;
}

export async function authenticateKey(db: Db, keyHash: string): Promise<Row | undefined> {
  const [row] = await db`
    SELECT k.key_id, k.tenant_id, k.type, k.key_name, t.is_active AS tenant_active, t.rate_limit_per_minute
    FROM api_keys k JOIN tenants t ON t.tenant_id = k.tenant_id
    WHERE k.key_hash = ${keyHash} AND k.is_active`;
  return row;
}

/** Adds batched uses: [{h: key hash, c: count, l: last used ISO}]. */
export async function addKeyUses(db: Db, uses: { h: string; c: number; l: string }[]) {
  if (uses.length === 0) return;
  await db`
    UPDATE api_keys k SET usage_count = k.usage_count + v.c,
      last_used_at = GREATEST(COALESCE(k.last_used_at, v.l), v.l)
    FROM jsonb_to_recordset(${db.json(uses as never)}) AS v(h text, c bigint, l timestamptz)
    WHERE k.key_hash = v.h`;
}

// ---- admin users ----

export async function findUserByEmail(db: Db, email: string): Promise<Row | undefined> {
  const [row] = await db`SELECT * FROM admin_users WHERE lower(email) = ${email.toLowerCase()}`;
  return row;
}

export async function findUser(db: Db, userId: string, forUpdate = false): Promise<Row | undefined> {
  const rows = forUpdate
    ? await db`SELECT * FROM admin_users WHERE user_id = ${userId} FOR UPDATE`
    : await db`SELECT * FROM admin_users WHERE user_id = ${userId}`;
  return rows[0];
}

export async function insertSession(
  db: Db,
  s: { sessionId: string; tokenHash: string; userId: string; expiresAt: Date; ip?: string; userAgent?: string },
) {
  await db`
    INSERT INTO admin_sessions (session_id, token_hash, user_id, expires_at, ip, user_agent, last_seen_at)
    VALUES (${s.sessionId}, ${s.tokenHash}, ${s.userId}, ${s.expiresAt}, ${s.ip ?? null}, ${s.userAgent ?? null}, now())`;
}
