/** The `tenants` table. */
import type { Tenant, TenantSummary } from '../domain.js';
import type { Db } from './db.js';

interface TenantRow {
  tenant_id: string;
  tenant_name: string;
  is_active: boolean;
  contact_email: string;
  monthly_quota_mb: number;
  rate_limit_per_minute: number;
  notes: string | null;
  model_id: string;
  allowed_models: string[];
  credentials_include_prompt: boolean;
  created_at: Date;
  updated_at: Date;
}

type TenantSummaryRow = Pick<TenantRow, 'tenant_id' | 'tenant_name' | 'is_active' | 'created_at'>;

function toTenant(r: TenantRow): Tenant {
  return {
    tenantId: r.tenant_id,
    tenantName: r.tenant_name,
    isActive: r.is_active,
    contactEmail: r.contact_email,
    monthlyQuotaMb: r.monthly_quota_mb,
    rateLimitPerMinute: r.rate_limit_per_minute,
    notes: r.notes,
    modelId: r.model_id,
    allowedModels: r.allowed_models,
    credentialsIncludePrompt: r.credentials_include_prompt,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The settings a tenant is created with (its id aside) and that an update writes. */
export type TenantSettings = Pick<
  Tenant,
  | 'tenantName'
  | 'contactEmail'
  | 'monthlyQuotaMb'
  | 'rateLimitPerMinute'
  | 'notes'
  | 'modelId'
  | 'allowedModels'
  | 'credentialsIncludePrompt'
>;

/** forUpdate locks the row until the transaction ends (FOR UPDATE). */
export async function findTenant(db: Db, tenantId: string, forUpdate = false): Promise<Tenant | undefined> {
  const [row] = forUpdate
    ? await db<TenantRow[]>`SELECT * FROM tenants WHERE tenant_id = ${tenantId} FOR UPDATE`
    : await db<TenantRow[]>`SELECT * FROM tenants WHERE tenant_id = ${tenantId}`;
  return row && toTenant(row);
}

export async function listTenants(db: Db): Promise<Tenant[]> {
  const rows = await db<TenantRow[]>`SELECT * FROM tenants ORDER BY created_at, tenant_id`;
  return rows.map(toTenant);
}

/** Every tenant, by id, with the columns the platform statistics need. */
export async function listTenantSummaries(db: Db): Promise<TenantSummary[]> {
  const rows = await db<TenantSummaryRow[]>`SELECT tenant_id, tenant_name, is_active, created_at FROM tenants ORDER BY tenant_id`;
  return rows.map((r) => ({ tenantId: r.tenant_id, tenantName: r.tenant_name, isActive: r.is_active, createdAt: r.created_at }));
}

/** Creates a tenant; undefined when the id is taken. */
export async function insertTenant(db: Db, tenantId: string, t: TenantSettings): Promise<Tenant | undefined> {
  const [row] = await db<TenantRow[]>`
    INSERT INTO tenants (tenant_id, tenant_name, contact_email, monthly_quota_mb, rate_limit_per_minute, notes, model_id, allowed_models,
      credentials_include_prompt)
    VALUES (${tenantId}, ${t.tenantName}, ${t.contactEmail}, ${t.monthlyQuotaMb},
      ${t.rateLimitPerMinute}, ${t.notes}, ${t.modelId}, ${t.allowedModels}, ${t.credentialsIncludePrompt})
    ON CONFLICT (tenant_id) DO NOTHING
    RETURNING *`;
  return row && toTenant(row);
}

/** Writes every setting and the active flag; undefined when the tenant does not exist. */
export async function updateTenant(db: Db, tenantId: string, t: TenantSettings & { isActive: boolean }): Promise<Tenant | undefined> {
  const [row] = await db<TenantRow[]>`
    UPDATE tenants SET
      tenant_name = ${t.tenantName},
      contact_email = ${t.contactEmail},
      is_active = ${t.isActive},
      monthly_quota_mb = ${t.monthlyQuotaMb},
      rate_limit_per_minute = ${t.rateLimitPerMinute},
      notes = ${t.notes},
      model_id = ${t.modelId},
      allowed_models = ${t.allowedModels},
      credentials_include_prompt = ${t.credentialsIncludePrompt},
      updated_at = now()
    WHERE tenant_id = ${tenantId} RETURNING *`;
  return row && toTenant(row);
}
