/** API keys: authentication (the gateway's), usage counts, creation and revocation. */
import { API_KEYS_PER_TENANT_MAX } from '@imagegen/api-schemas/vocab';
import type { CreatedApiKey } from '@imagegen/contracts/tenancy/v1/tenancy';
import { badRequest, conflict, invalidPayload, notFound, type TransactionSql, unauthorized } from '@imagegen/platform';
import { generateApiKey, keyDisplayParts, randomId, sha256Hex } from '../crypto.js';
import type { KeyType } from '../domain.js';
import * as apiKeys from '../repositories/api-keys.js';
import * as tenants from '../repositories/tenants.js';
import { type HandlerContext, normalizeTenantId, type TenancyHandlers, tenantNotFound } from './context.js';
import * as present from './present.js';
import { checkKeySpec } from './validation.js';

/** The refusal of a key that requires signed requests where none can be verified (MCP, the OAuth sign-in). */
export const SIGNED_KEY_ELSEWHERE = 'This API key requires signed requests, which only the REST API verifies';

/** A key made when none is told: live. */
export const DEFAULT_KEY_TYPE: KeyType = 'live';

/** Makes and stores a new key; the full key is answered this once. */
export async function issueKey(tx: TransactionSql, tenantId: string, name: string, type: KeyType): Promise<CreatedApiKey> {
  const key = generateApiKey(type);
  const { prefix, suffix } = keyDisplayParts(key);
  const stored = await apiKeys.insertKey(tx, {
    keyId: randomId('key_'),
    tenantId,
    hash: sha256Hex(key),
    prefix,
    suffix,
    name: name.trim(),
    type,
  });
  return { apiKey: key, keyName: stored.keyName, type: stored.type, keyId: stored.keyId, createdAt: stored.createdAt.toISOString() };
}

/** 23505 on the active-name index: a duplicate key name. */
function mapKeyConflict(err: unknown, name: string): never {
  if ((err as { code?: string }).code === '23505') {
    throw conflict(`API key with name ${name.trim()} already exists for this tenant`);
  }
  throw err;
}

export function apiKeyHandlers(
  c: HandlerContext,
): Pick<TenancyHandlers, 'authenticateApiKey' | 'recordApiKeyUsage' | 'createApiKey' | 'revokeApiKey'> {
  const { sql, usage } = c;
  return {
    async authenticateApiKey(req) {
      const key = await apiKeys.authenticateKey(sql, req.keyHash);
      if (!key) throw unauthorized();
      // A key that requires signed requests is good only where signatures are verified (the gateway's REST API):
      // mcp and the OAuth sign-in cannot verify them, so they are refused it as an unknown key.
      if (key.signatureRequired && !req.verifiesSignatures) throw unauthorized(SIGNED_KEY_ELSEWHERE);
      const secrets = key.signatureRequired ? await apiKeys.readSigningSecrets(sql, c.credentialsKey, key.tenantId, key.keyId) : undefined;
      usage.record(req.keyHash, 1);
      return {
        tenantId: key.tenantId,
        keyType: key.type,
        keyName: key.keyName,
        tenantActive: key.tenantActive,
        rateLimitPerMinute: key.rateLimitPerMinute,
        keyId: key.keyId,
        signatureRequired: key.signatureRequired,
        signingSecrets: secrets
          ? [
              { secret: secrets.current },
              ...(secrets.previous ? [{ secret: secrets.previous.secret, expiresAt: secrets.previous.expiresAt.toISOString() }] : []),
            ]
          : [],
      };
    },

    async recordApiKeyUsage(req) {
      for (const u of req.uses) usage.record(u.keyHash, u.count, u.lastUsedAt ? new Date(u.lastUsedAt) : undefined);
      return {};
    },

    async createApiKey(req) {
      const tenantId = normalizeTenantId(req.tenantId);
      const details: string[] = [];
      const type = checkKeySpec(details, req.keyName, req.type || DEFAULT_KEY_TYPE);
      if (details.length || !type) throw invalidPayload(details);
      try {
        return await sql.begin(async (tx) => {
          if (!(await tenants.findTenant(tx, tenantId, true))) throw tenantNotFound();
          if ((await apiKeys.countActiveKeys(tx, tenantId)) >= API_KEYS_PER_TENANT_MAX) {
            throw badRequest(`API key limit reached: a tenant can have at most ${API_KEYS_PER_TENANT_MAX} active API keys`, [
              'revoke a key (DELETE /admin/tenants/:tenantId/api-keys/:keyId) before creating another',
            ]);
          }
          const created = await issueKey(tx, tenantId, req.keyName, type);
          await c.tenantChanged(tx, tenantId, 'api_key_created');
          return created;
        });
      } catch (err) {
        return mapKeyConflict(err, req.keyName);
      }
    },

    async revokeApiKey(req) {
      const tenantId = normalizeTenantId(req.tenantId);
      const ref = req.keyRef ?? '';
      return sql.begin(async (tx) => {
        if (!(await tenants.findTenant(tx, tenantId, true))) throw tenantNotFound();
        const key = await apiKeys.findKeyByRef(tx, tenantId, ref);
        if (!key) throw notFound('API key not found');
        if (!key.isActive) return present.keyRecord(key);
        const revoked = await apiKeys.revokeKey(tx, key.keyId);
        await c.tenantChanged(tx, tenantId, 'api_key_revoked');
        return present.keyRecord(revoked);
      });
    },
  };
}
