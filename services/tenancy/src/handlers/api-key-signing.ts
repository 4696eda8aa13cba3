/**
 * Signed requests (SPEC 5.8, extension; issue 37), opt-in per API key: an admin turns the requirement on (the
 * signing secret is answered this once) or off, and rotates the secret (the previous one is still accepted for a
 * grace period). The gateway verifies the signatures (services/gateway/src/request-signature.ts) with the secrets
 * AuthenticateApiKey gives it; every change writes TenantChanged, so gateways drop the key from their caches.
 */
import { SIGNING_GRACE_SECONDS_MAX } from '@imagegen/api-schemas/vocab';
import { conflict, invalidPayload, notFound, type TransactionSql } from '@imagegen/platform';
import { randomToken } from '../crypto.js';
import type { ApiKey } from '../domain.js';
import * as apiKeys from '../repositories/api-keys.js';
import * as tenants from '../repositories/tenants.js';
import { type HandlerContext, normalizeTenantId, type TenancyHandlers, tenantNotFound } from './context.js';
import * as present from './present.js';

/** A new signing secret: "sigsec_" and 32 random bytes (base64url). The HMAC key is the whole string, as UTF-8. */
export const newSigningSecret = () => randomToken('sigsec_');

/** The tenant's active key a reference (key id or name) names, or 404 (a revoked key, another tenant's key). */
async function activeKey(tx: TransactionSql, tenantId: string, ref: string): Promise<ApiKey> {
  if (!(await tenants.findTenant(tx, tenantId, true))) throw tenantNotFound();
  const key = await apiKeys.findKeyByRef(tx, tenantId, ref);
  if (!key?.isActive) throw notFound('API key not found');
  return key;
}

export function apiKeySigningHandlers(c: HandlerContext): Pick<TenancyHandlers, 'setApiKeySigning' | 'rotateApiKeySigningSecret'> {
  const { sql, credentialsKey } = c;
  return {
    async setApiKeySigning(req) {
      const tenantId = normalizeTenantId(req.tenantId);
      return sql.begin(async (tx) => {
        const key = await activeKey(tx, tenantId, req.keyRef ?? '');
        if (req.signatureRequired) {
          // Already on: the state, never the secret again (rotate for a new one).
          if (key.signatureRequired) return present.keySigning(key);
          const secret = newSigningSecret();
          const on = await apiKeys.enableSigning(tx, credentialsKey, tenantId, key.keyId, secret);
          if (!on) throw notFound('API key not found');
          await c.tenantChanged(tx, tenantId, 'api_key_signing');
          return present.keySigning(on, secret);
        }
        if (!key.signatureRequired) return present.keySigning(key);
        const off = await apiKeys.disableSigning(tx, tenantId, key.keyId);
        if (!off) throw notFound('API key not found');
        await c.tenantChanged(tx, tenantId, 'api_key_signing');
        return present.keySigning(off);
      });
    },

    async rotateApiKeySigningSecret(req) {
      const tenantId = normalizeTenantId(req.tenantId);
      const grace = req.gracePeriodSeconds;
      if (grace !== undefined && (!Number.isInteger(grace) || grace < 0 || grace > SIGNING_GRACE_SECONDS_MAX)) {
        throw invalidPayload([`grace_period_seconds must be an integer between 0 and ${SIGNING_GRACE_SECONDS_MAX}`]);
      }
      const graceMs = grace === undefined ? c.signingSecretGraceMs : grace * 1000;
      return sql.begin(async (tx) => {
        const key = await activeKey(tx, tenantId, req.keyRef ?? '');
        const secret = newSigningSecret();
        const rotated = key.signatureRequired
          ? await apiKeys.rotateSigningSecret(tx, credentialsKey, tenantId, key.keyId, secret, graceMs)
          : undefined;
        if (!rotated) {
          throw conflict('Signed requests are not enabled for this API key', [
            'turn them on first: POST /admin/tenants/:tenantId/api-keys/:keyRef/signing {"signature_required": true}',
          ]);
        }
        await c.tenantChanged(tx, tenantId, 'api_key_signing');
        return present.keySigning(rotated, secret);
      });
    },
  };
}
