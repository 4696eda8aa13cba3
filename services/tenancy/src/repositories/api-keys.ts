/**
 * The `api_keys` table (only a key's sha256 is stored). A key that requires signed requests (SPEC 5.8, extension)
 * has its signing secrets here too, AES-256-GCM encrypted with CREDENTIALS_KEY and "<tenant_id>:<key_id>:signing"
 * as associated data (so a blob cannot be moved to another key): they are encrypted and decrypted here only.
 */
import { decryptSecret, encryptSecret } from '../crypto.js';
import type { ApiKey, KeyAuthentication, KeyType, SigningSecrets } from '../domain.js';
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
  signature_required: boolean;
  signing_secret_created_at: Date | null;
  previous_signing_secret_expires_at: Date | null;
}

interface KeyAuthenticationRow {
  key_id: string;
  tenant_id: string;
  type: KeyType;
  key_name: string;
  tenant_active: boolean;
  rate_limit_per_minute: number;
  signature_required: boolean;
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
    signatureRequired: r.signature_required,
    signingSecretCreatedAt: r.signing_secret_created_at,
    previousSigningSecretExpiresAt: r.previous_signing_secret_expires_at,
  };
}

/** The columns of a key record (never the encrypted secrets). */
const RECORD = [
  'key_id',
  'tenant_id',
  'key_hash',
  'key_prefix',
  'key_suffix',
  'key_name',
  'type',
  'is_active',
  'usage_count',
  'last_used_at',
  'created_at',
  'revoked_at',
  'signature_required',
  'signing_secret_created_at',
  'previous_signing_secret_expires_at',
];

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
  const rows = await db<ApiKeyRow[]>`SELECT ${db(RECORD)} FROM api_keys WHERE tenant_id = ${tenantId} ORDER BY created_at, key_id`;
  return rows.map(toApiKey);
}

/** Stores a new key (created_at is the clock's, so keys made in one transaction keep their order). */
export async function insertKey(db: Db, k: NewApiKey): Promise<ApiKey> {
  const [row] = await db<ApiKeyRow[]>`
    INSERT INTO api_keys (key_id, tenant_id, key_hash, key_prefix, key_suffix, key_name, type, created_at)
    VALUES (${k.keyId}, ${k.tenantId}, ${k.hash}, ${k.prefix}, ${k.suffix}, ${k.name}, ${k.type}, clock_timestamp())
    RETURNING ${db(RECORD)}`;
  return toApiKey(row);
}

export async function countActiveKeys(db: Db, tenantId: string): Promise<number> {
  const [{ n }] = await db<[{ n: number }]>`SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = ${tenantId} AND is_active`;
  return n;
}

/** The key a reference names: by id first, then the active key of that name, then the latest revoked one of that name. */
export async function findKeyByRef(db: Db, tenantId: string, ref: string): Promise<ApiKey | undefined> {
  const [row] = await db<ApiKeyRow[]>`
    SELECT ${db(RECORD)} FROM api_keys WHERE tenant_id = ${tenantId} AND (key_id = ${ref} OR key_name = ${ref})
    ORDER BY (key_id = ${ref}) DESC, is_active DESC, created_at DESC LIMIT 1`;
  return row && toApiKey(row);
}

export async function revokeKey(db: Db, keyId: string): Promise<ApiKey> {
  const [row] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET is_active = false, revoked_at = now() WHERE key_id = ${keyId} RETURNING ${db(RECORD)}`;
  return toApiKey(row);
}

/** The active key with this hash, and its tenant's state. */
export async function authenticateKey(db: Db, keyHash: string): Promise<KeyAuthentication | undefined> {
  const [row] = await db<KeyAuthenticationRow[]>`
    SELECT k.key_id, k.tenant_id, k.type, k.key_name, t.is_active AS tenant_active, t.rate_limit_per_minute, k.signature_required
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
    signatureRequired: row.signature_required,
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

// ---- signed requests: the signing secrets ----

const signingData = (tenantId: string, keyId: string) => `${tenantId}:${keyId}:signing`;

/** The secrets of an active key that requires signatures, decrypted: the current one, the previous one while in its grace. */
export async function readSigningSecrets(
  db: Db,
  credentialsKey: Buffer,
  tenantId: string,
  keyId: string,
): Promise<SigningSecrets | undefined> {
  const [row] = await db<{ cur: Buffer | null; prev: Buffer | null; prev_until: Date | null; now: Date }[]>`
    SELECT signing_secret AS cur, previous_signing_secret AS prev, previous_signing_secret_expires_at AS prev_until, now() AS now
    FROM api_keys WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND is_active AND signature_required`;
  if (!row?.cur) return undefined;
  const out: SigningSecrets = { current: decryptSecret(credentialsKey, row.cur, signingData(tenantId, keyId)) };
  if (row.prev && row.prev_until && row.prev_until > row.now) {
    out.previous = { secret: decryptSecret(credentialsKey, row.prev, signingData(tenantId, keyId)), expiresAt: row.prev_until };
  }
  return out;
}

/** Requires signatures with this secret; undefined when the key is not active or required them already (nothing changes). */
export async function enableSigning(db: Db, credentialsKey: Buffer, tenantId: string, keyId: string, secret: string) {
  const encrypted = encryptSecret(credentialsKey, secret, signingData(tenantId, keyId));
  const [row] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET signature_required = true, signing_secret = ${encrypted}, signing_secret_created_at = now(),
      previous_signing_secret = NULL, previous_signing_secret_expires_at = NULL
    WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND is_active AND NOT signature_required
    RETURNING ${db(RECORD)}`;
  return row && toApiKey(row);
}

/** No longer requires signatures and forgets the secrets; undefined when the key is not active. */
export async function disableSigning(db: Db, tenantId: string, keyId: string) {
  const [row] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET signature_required = false, signing_secret = NULL, signing_secret_created_at = NULL,
      previous_signing_secret = NULL, previous_signing_secret_expires_at = NULL
    WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND is_active
    RETURNING ${db(RECORD)}`;
  return row && toApiKey(row);
}

/**
 * A new current secret; the one it replaces stays accepted for `graceMs` (none when 0). Undefined when the key is
 * not active or does not require signatures.
 */
export async function rotateSigningSecret(
  db: Db,
  credentialsKey: Buffer,
  tenantId: string,
  keyId: string,
  secret: string,
  graceMs: number,
) {
  const encrypted = encryptSecret(credentialsKey, secret, signingData(tenantId, keyId));
  const kept = graceMs > 0;
  const [row] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET
      previous_signing_secret = CASE WHEN ${kept} THEN signing_secret END,
      previous_signing_secret_expires_at = CASE WHEN ${kept} THEN now() + ${graceMs} * interval '1 millisecond' END,
      signing_secret = ${encrypted}, signing_secret_created_at = now()
    WHERE tenant_id = ${tenantId} AND key_id = ${keyId} AND is_active AND signature_required
    RETURNING ${db(RECORD)}`;
  return row && toApiKey(row);
}
