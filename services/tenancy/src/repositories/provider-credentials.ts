/**
 * The `provider_credentials` table: per tenant and provider, the JSON array of keys, AES-256-GCM encrypted with
 * "tenant_id:provider" as associated data (so a row cannot be moved to another tenant). Keys are encrypted and
 * decrypted here; nothing else sees the stored form.
 */
import type { Provider } from '@imagegen/api-schemas/vocab';
import { decryptSecret, encryptSecret } from '../crypto.js';
import type { ProviderPool } from '../domain.js';
import type { Db } from './db.js';

interface ProviderPoolRow {
  provider: Provider;
  key_count: number;
}

const associatedData = (tenantId: string, provider: string) => `${tenantId}:${provider}`;

/** A tenant's pools (provider and key count), by provider. */
export async function listPools(db: Db, tenantId: string): Promise<ProviderPool[]> {
  const rows = await db<ProviderPoolRow[]>`
    SELECT provider, key_count FROM provider_credentials WHERE tenant_id = ${tenantId} ORDER BY provider`;
  return rows.map((r) => ({ provider: r.provider, keyCount: r.key_count }));
}

/** The keys of a tenant's pool, decrypted; undefined when the tenant has no pool for this provider. */
export async function readPoolKeys(db: Db, credentialsKey: Buffer, tenantId: string, provider: string): Promise<string[] | undefined> {
  const [row] = await db<{ encrypted: Buffer }[]>`
    SELECT encrypted FROM provider_credentials WHERE tenant_id = ${tenantId} AND provider = ${provider}`;
  if (!row) return undefined;
  const keys: string[] = JSON.parse(decryptSecret(credentialsKey, row.encrypted, associatedData(tenantId, provider)));
  return keys;
}

/** Creates or replaces a tenant's pool for one provider. */
export async function savePool(db: Db, credentialsKey: Buffer, tenantId: string, provider: Provider, keys: string[]) {
  const encrypted = encryptSecret(credentialsKey, JSON.stringify(keys), associatedData(tenantId, provider));
  await db`
    INSERT INTO provider_credentials (tenant_id, provider, encrypted, key_count)
    VALUES (${tenantId}, ${provider}, ${encrypted}, ${keys.length})
    ON CONFLICT (tenant_id, provider) DO UPDATE SET encrypted = EXCLUDED.encrypted, key_count = EXCLUDED.key_count, updated_at = now()`;
}

export async function deletePool(db: Db, tenantId: string, provider: Provider) {
  await db`DELETE FROM provider_credentials WHERE tenant_id = ${tenantId} AND provider = ${provider}`;
}
