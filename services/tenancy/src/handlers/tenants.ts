/** Tenants: reads, creation (with provider pools and first keys), updates, provider credentials, statistics. */
import {
  API_KEYS_PER_TENANT_MAX,
  DEFAULT_MODEL_ID,
  MODEL_IDS,
  PROVIDERS,
  TENANT_ID_MAX,
  TENANT_MONTHLY_QUOTA_MB_DEFAULT,
  TENANT_NAME_MAX,
  TENANT_NOTES_MAX,
  TENANT_RATE_LIMIT_PER_MINUTE_DEFAULT,
} from '@imagegen/api-schemas/vocab';
import type { CreatedApiKey, TenantDetail } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, type CallContext, conflict, invalidPayload, type TransactionSql } from '@imagegen/platform';
import type { KeyType } from '../domain.js';
import { providerOfModel } from '../models.js';
import * as apiKeys from '../repositories/api-keys.js';
import type { Db } from '../repositories/db.js';
import * as providerCredentials from '../repositories/provider-credentials.js';
import * as tenants from '../repositories/tenants.js';
import { DEFAULT_KEY_TYPE, issueKey } from './api-keys.js';
import { type HandlerContext, normalizeTenantId, type TenancyHandlers, tenantNotFound } from './context.js';
import * as present from './present.js';
import { checkKeySpec, checkModels, checkPools, isEmail, type PoolUpdate, TENANT_ID } from './validation.js';

/** 30 days, for the statistics' "created in the last 30 days". */
const LAST_30_DAYS_MS = 30 * 86_400_000;

async function detail(db: Db, tenantId: string): Promise<TenantDetail> {
  const t = await tenants.findTenant(db, tenantId);
  if (!t) throw tenantNotFound();
  const [keys, pools] = await Promise.all([apiKeys.listKeys(db, tenantId), providerCredentials.listPools(db, tenantId)]);
  return { tenant: present.tenant(t), apiKeys: keys.map(present.keyRecord), providers: pools.map(present.providerPool) };
}

export function tenantHandlers(
  c: HandlerContext,
): Pick<
  TenancyHandlers,
  'getTenant' | 'listTenants' | 'getTenantDetail' | 'createTenant' | 'updateTenant' | 'getProviderCredentials' | 'getTenantStats'
> {
  const { sql, credentialsKey } = c;

  async function writePools(tx: TransactionSql, tenantId: string, pools: PoolUpdate[]) {
    for (const p of pools) {
      if (p.remove) await providerCredentials.deletePool(tx, tenantId, p.provider);
      else await providerCredentials.savePool(tx, credentialsKey, tenantId, p.provider, p.keys);
    }
  }

  return {
    async getTenant(req) {
      const t = await tenants.findTenant(sql, normalizeTenantId(req.tenantId));
      if (!t) throw tenantNotFound();
      return present.tenant(t);
    },

    async listTenants() {
      return { tenants: (await tenants.listTenants(sql)).map(present.tenant) };
    },

    async getTenantDetail(req) {
      return detail(sql, normalizeTenantId(req.tenantId));
    },

    async createTenant(req) {
      const details: string[] = [];
      const tenantId = normalizeTenantId(req.tenantId);
      if (!tenantId) details.push('tenant_id is required');
      else if (!TENANT_ID.test(tenantId)) {
        details.push(
          `tenant_id must be 1-${TENANT_ID_MAX} lowercase letters, digits, hyphens or underscores, starting with a letter or digit`,
        );
      }
      const name = (req.tenantName ?? '').trim();
      if (!name) details.push('tenant_name is required');
      else if (name.length > TENANT_NAME_MAX) details.push(`tenant_name must be at most ${TENANT_NAME_MAX} characters`);
      const email = (req.contactEmail ?? '').trim();
      if (!email) details.push('contact_email is required');
      else if (!isEmail(email)) details.push('contact_email must be a valid email address');
      if (req.monthlyQuotaMb !== undefined && req.monthlyQuotaMb < 1) details.push('monthly_quota_mb must be >= 1');
      if (req.rateLimitPerMinute !== undefined && req.rateLimitPerMinute < 1) details.push('rate_limit_per_minute must be >= 1');
      if (req.notes !== undefined && req.notes.length > TENANT_NOTES_MAX)
        details.push(`notes must be at most ${TENANT_NOTES_MAX} characters`);
      const pools = checkPools(details, req.providerPools).filter((p) => !p.remove);
      if (pools.length === 0)
        details.push(`At least one provider key is required (${PROVIDERS.map((p) => `provider_credentials.${p}`).join(' or ')})`);
      const configured = new Set(pools.map((p) => p.provider));
      const allowed = req.hasAllowedModels ? [...new Set(req.allowedModels)] : MODEL_IDS.filter((m) => configured.has(providerOfModel(m)));
      checkModels(details, req.modelId, req.hasAllowedModels ? allowed : undefined);
      const modelId = req.modelId ?? (allowed.includes(DEFAULT_MODEL_ID) ? DEFAULT_MODEL_ID : (allowed[0] ?? DEFAULT_MODEL_ID));
      if (details.length === 0 && !allowed.includes(modelId)) details.push('model_id must be one of allowed_models');
      const keySpecs = req.hasApiKeys
        ? req.apiKeys.map((k) => ({ keyName: k.keyName, type: k.type || DEFAULT_KEY_TYPE }))
        : [
            { keyName: 'Default live key', type: 'live' },
            { keyName: 'Default test key', type: 'test' },
          ];
      if (keySpecs.length > API_KEYS_PER_TENANT_MAX) details.push(`api_keys must have at most ${API_KEYS_PER_TENANT_MAX} items`);
      const keys: { keyName: string; type: KeyType }[] = [];
      keySpecs.forEach((k, i) => {
        const type = checkKeySpec(details, k.keyName, k.type, `api_keys.${i}.`);
        if (type) keys.push({ keyName: k.keyName, type });
      });
      const names = keySpecs.map((k) => (k.keyName ?? '').trim());
      if (new Set(names).size !== names.length) details.push('api_keys key_name values must be unique');
      if (details.length) throw invalidPayload(details);

      try {
        return await sql.begin(async (tx) => {
          const tenant = await tenants.insertTenant(tx, tenantId, {
            tenantName: name,
            contactEmail: email,
            monthlyQuotaMb: req.monthlyQuotaMb ?? TENANT_MONTHLY_QUOTA_MB_DEFAULT,
            rateLimitPerMinute: req.rateLimitPerMinute ?? TENANT_RATE_LIMIT_PER_MINUTE_DEFAULT,
            notes: req.notes ?? null,
            modelId,
            allowedModels: allowed,
            credentialsIncludePrompt: req.credentialsIncludePrompt ?? false,
          });
          if (!tenant) throw conflict(`Tenant ${tenantId} already exists`);
          await writePools(tx, tenantId, pools);
          const created: CreatedApiKey[] = [];
          for (const k of keys) created.push(await issueKey(tx, tenantId, k.keyName, k.type));
          await c.tenantChanged(tx, tenantId, 'created');
          return { tenant: present.tenant(tenant), apiKeys: created };
        });
      } catch (err) {
        if (err instanceof AppError) throw err;
        if ((err as { code?: string }).code === '23505') throw conflict(`Tenant ${tenantId} already exists`);
        throw err;
      }
    },

    async updateTenant(req) {
      const tenantId = normalizeTenantId(req.tenantId);
      const details: string[] = [];
      const name = req.tenantName?.trim();
      if (name !== undefined && (name.length === 0 || name.length > TENANT_NAME_MAX)) {
        details.push(`tenant_name must be between 1 and ${TENANT_NAME_MAX} characters`);
      }
      const email = req.contactEmail?.trim();
      if (email !== undefined && !isEmail(email)) details.push('contact_email must be a valid email address');
      if (req.monthlyQuotaMb !== undefined && req.monthlyQuotaMb < 1) details.push('monthly_quota_mb must be >= 1');
      if (req.rateLimitPerMinute !== undefined && req.rateLimitPerMinute < 1) details.push('rate_limit_per_minute must be >= 1');
      if (req.notes !== undefined && req.notes.length > TENANT_NOTES_MAX)
        details.push(`notes must be at most ${TENANT_NOTES_MAX} characters`);
      const allowedIn = req.hasAllowedModels ? [...new Set(req.allowedModels)] : undefined;
      checkModels(details, req.modelId, allowedIn);
      const pools = checkPools(details, req.providerPools);
      if (details.length) throw invalidPayload(details);

      return sql.begin(async (tx) => {
        const cur = await tenants.findTenant(tx, tenantId, true);
        if (!cur) throw tenantNotFound();
        const allowed = allowedIn ?? cur.allowedModels;
        const modelId = req.modelId ?? cur.modelId;
        if (!allowed.includes(modelId)) {
          throw invalidPayload([
            req.modelId !== undefined
              ? 'model_id must be one of allowed_models'
              : `allowed_models must include the tenant's model_id (${modelId})`,
          ]);
        }
        if (pools.length) {
          const existing = new Set<string>((await providerCredentials.listPools(tx, tenantId)).map((p) => p.provider));
          for (const p of pools) {
            if (p.remove) existing.delete(p.provider);
            else existing.add(p.provider);
          }
          if (existing.size === 0)
            throw invalidPayload(['At least one provider key is required; a tenant cannot remove its last provider']);
          await writePools(tx, tenantId, pools);
        }
        // A purge under way (issue 40, item 4) finishes; the tenant is never brought back half-removed.
        if (req.isActive === true && !cur.isActive) {
          const [p] = await tx`SELECT purge_started_at FROM tenants WHERE tenant_id = ${tenantId}`;
          if (p?.purge_started_at) throw conflict('Tenant is being purged; finish the purge');
        }
        await tenants.updateTenant(tx, tenantId, {
          tenantName: name ?? cur.tenantName,
          contactEmail: email ?? cur.contactEmail,
          isActive: req.isActive ?? cur.isActive,
          monthlyQuotaMb: req.monthlyQuotaMb ?? cur.monthlyQuotaMb,
          rateLimitPerMinute: req.rateLimitPerMinute ?? cur.rateLimitPerMinute,
          notes: req.clearNotes ? null : (req.notes ?? cur.notes),
          modelId,
          allowedModels: allowed,
          credentialsIncludePrompt: req.credentialsIncludePrompt ?? cur.credentialsIncludePrompt,
        });
        const reason =
          req.isActive === false && cur.isActive ? 'deactivated' : req.isActive === true && !cur.isActive ? 'activated' : 'updated';
        await c.tenantChanged(tx, tenantId, reason);
        return detail(tx, tenantId);
      });
    },

    async getProviderCredentials(req, ctx: CallContext) {
      const tenantId = normalizeTenantId(req.tenantId || ctx.principal.tenantId || '');
      const keys = await providerCredentials.readPoolKeys(sql, credentialsKey, tenantId, req.provider);
      if (!keys) {
        if (!(await tenants.findTenant(sql, tenantId))) throw tenantNotFound();
        return { keys: [] };
      }
      return { keys };
    },

    async getTenantStats() {
      const rows = await tenants.listTenantSummaries(sql);
      const active = rows.filter((r) => r.isActive).length;
      const since = Date.now() - LAST_30_DAYS_MS;
      return {
        total: rows.length,
        active,
        inactive: rows.length - active,
        createdLast30d: rows.filter((r) => r.createdAt.getTime() >= since).length,
        tenantNames: rows.map((r) => ({ tenantId: r.tenantId, tenantName: r.tenantName, isActive: r.isActive })),
      };
    },
  };
}
