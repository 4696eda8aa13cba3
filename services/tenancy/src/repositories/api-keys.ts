/** The `api_keys` table (only a key's sha256 is stored). */
import type { ApiKey, KeyAuthentication, KeyType } from '../domain.js';
import type { Db } from './db.js';

interface ApiKeyRow {
  key_id: string;
  tenant_id: string;
  key_hash: string;
  key_prefix: string;
  key_suffix: string;
  key_name: string;
  type: KeyType;
  is_active: boolean;
  usage_count: number;
  last_used_at: Date | null;
  created_at: Date;
  revoked_at: Date | null;
}

interface KeyAuthenticationRow {
  key_id: string;
  tenant_id: string;
  type: KeyType;
  key_name: string;
  tenant_active: boolean;
  rate_limit_per_minute: number;
}

function toApiKey(r: ApiKeyRow): ApiKey {
  return {
    keyId: r.key_id,
    tenantId: r.tenant_id,
    keyPrefix: r.key_prefix,
    keySuffix: r.key_suffix,
    keyName: r.key_name,
    type: r.type,
    isActive: r.is_active,
    usageCount: r.usage_count,
    lastUsedAt: r.last_used_at,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

export interface NewApiKey {
  keyId: string;
  tenantId: string;
  hash: string;
  prefix: string;
  suffix: string;
  name: string;
  type: KeyType;
}

/** A tenant's keys, active and revoked, oldest first. */
export async function listKeys(db: Db, tenantId: string): Promise<ApiKey[]> {
  const rows = await db<ApiKeyRow[]>`SELECT * FROM api_keys WHERE tenant_id = ${tenantId} ORDER BY created_at, key_id`;
  return rows.map(toApiKey);
}

/** Stores a new key (created_at is the clock's, so keys made in one transaction keep their order). */
export async function insertKey(db: Db, k: NewApiKey): Promise<ApiKey> {
  const [row] = await db<ApiKeyRow[]>`
    INSERT INTO api_keys (key_id, tenant_id, key_hash, key_prefix, key_suffix, key_name, type, created_at)
    VALUES (${k.keyId}, ${k.tenantId}, ${k.hash}, ${k.prefix}, ${k.suffix}, ${k.name}, ${k.type}, clock_timestamp())
    RETURNING *`;
  return toApiKey(row);
}

export async function countActiveKeys(db: Db, tenantId: string): Promise<number> {
  const [{ n }] = await db<[{ n: number }]>`SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = ${tenantId} AND is_active`;
  return n;
}

/** The key a reference names: by id first, then the active key of that name, then the latest revoked one of that name. */
export async function findKeyByRef(db: Db, tenantId: string, ref: string): Promise<ApiKey | undefined> {
  const [row] = await db<ApiKeyRow[]>`
    SELECT * FROM api_keys WHERE tenant_id = ${tenantId} AND (key_id = ${ref} OR key_name = ${ref})
    ORDER BY (key_id = ${ref}) DESC, is_active DESC, created_at DESC LIMIT 1`;
  return row && toApiKey(row);
}

export async function revokeKey(db: Db, keyId: string): Promise<ApiKey> {
  const [row] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET is_active = false, revoked_at = now() WHERE key_id = ${keyId} RETURNING *`;
  return toApiKey(row);
}

/** The active key with this hash, and its tenant's state. */
export async function authenticateKey(db: Db, keyHash: string): Promise<KeyAuthentication | undefined> {
  const [row] = await db<KeyAuthenticationRow[]>`
    SELECT k.key_id, k.tenant_id, k.type, k.key_name, t.is_active AS tenant_active, t.rate_limit_per_minute
    FROM api_keys k JOIN tenants t ON t.tenant_id = k.tenant_id
    WHERE k.key_hash = ${keyHash} AND k.is_active`;
  if (!row) return undefined;
  return {
    keyId: row.key_id,
    tenantId: row.tenant_id,
    type: row.type,
    keyName: row.key_name,
    tenantActive: row.tenant_active,
    rateLimitPerMinute: row.rate_limit_per_minute,
  };
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
