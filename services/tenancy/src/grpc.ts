import { TenantChanged } from '@imagegen/contracts/events/v1/events';
import type {
  AdminSession,
  CreatedApiKey,
  ProviderPoolUpdate,
  TenancyServiceService,
  TenantDetail,
} from '@imagegen/contracts/tenancy/v1/tenancy';
import {
  AppError,
  badRequest,
  type CallContext,
  conflict,
  type Handlers,
  invalidPayload,
  notFound,
  type Sql,
  subjectFor,
  type TransactionSql,
  unauthorized,
  writeOutbox,
} from '@imagegen/platform';
import {
  decryptSecret,
  encryptSecret,
  generateApiKey,
  hashPassword,
  keyDisplayParts,
  randomId,
  randomToken,
  sha256Hex,
  verifyPassword,
} from './crypto.js';
import {
  ADMIN_ROLES,
  DEFAULT_INVITATION_DAYS,
  DEFAULT_MODEL,
  DEFAULT_QUOTA_MB,
  DEFAULT_RATE_LIMIT,
  LOCKOUT_MS,
  MAX_API_KEYS,
  MAX_FAILED_LOGINS,
  MAX_INVITATION_DAYS,
  MAX_KEY_NAME,
  MAX_PASSWORD_LENGTH,
  MAX_PROVIDER_KEYS,
  MIN_PASSWORD_LENGTH,
  MODEL_IDS,
  PROVIDERS,
  type Provider,
  providerOfModel,
  SESSION_TTL_MS,
} from './models.js';
import * as store from './store.js';
import type { UsageBatcher } from './usage-batcher.js';

export interface TenancyDeps {
  sql: Sql;
  credentialsKey: Buffer;
  eventsPrefix: string;
  usage: UsageBatcher;
  /** A scrypt hash of a random password, verified when the email is unknown (constant time). */
  dummyPasswordHash: string;
}

const TENANT_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const INVALID_LOGIN = 'Invalid email or password';

const tenantNotFound = () => notFound('Tenant not found');
const userNotFound = () => notFound('Admin user not found');
const invitationNotFound = () => notFound('Invitation not found');
const gone = (error: string) => new AppError(410, { error });

export function normalizeTenantId(id: string): string {
  return (id ?? '').trim().toLowerCase();
}

function normalizeEmail(email: string): string {
  return (email ?? '').trim().toLowerCase();
}

function checkModels(details: string[], modelId: string | undefined, allowed: string[] | undefined) {
  if (allowed) {
    if (allowed.length === 0) details.push('allowed_models must contain at least one model');
    for (const m of allowed) {
      if (!(MODEL_IDS as readonly string[]).includes(m)) details.push(`allowed_models contains an unknown model: ${m}`);
    }
  }
  if (modelId !== undefined && !(MODEL_IDS as readonly string[]).includes(modelId)) {
    details.push(`model_id must be one of: ${MODEL_IDS.join(', ')}`);
  }
}

/** Validates provider pool updates; returns them normalized (trimmed keys). */
function checkPools(details: string[], pools: ProviderPoolUpdate[]): ProviderPoolUpdate[] {
  const seen = new Set<string>();
  const out: ProviderPoolUpdate[] = [];
  for (const p of pools) {
    if (!(PROVIDERS as readonly string[]).includes(p.provider)) {
      details.push(`provider_credentials.${p.provider} is not a known provider (provA, provB)`);
      continue;
    }
    if (seen.has(p.provider)) {
      details.push(`provider_credentials.${p.provider} is given twice`);
      continue;
    }
    seen.add(p.provider);
    const keys = p.remove ? [] : p.keys.map((k) => k.trim());
    if (keys.some((k) => k.length === 0)) details.push(`provider_credentials.${p.provider} keys cannot be empty`);
    if (keys.some((k) => k.length > 1000)) details.push(`provider_credentials.${p.provider} keys must be at most 1000 characters`);
    if (keys.length > MAX_PROVIDER_KEYS) {
      details.push(`provider_credentials.${p.provider} must have at most ${MAX_PROVIDER_KEYS} keys`);
    }
    if (new Set(keys).size !== keys.length) details.push(`provider_credentials.${p.provider} contains duplicate keys`);
    out.push({ provider: p.provider, keys, remove: p.remove || keys.length === 0 });
  }
  return out;
}

function checkKeySpec(details: string[], name: string, type: string, prefix = '') {
  const n = (name ?? '').trim();
  if (n.length === 0) details.push(`${prefix}key_name is required`);
  else if (n.length > MAX_KEY_NAME) details.push(`${prefix}key_name must be at most ${MAX_KEY_NAME} characters`);
  if (type !== 'live' && type !== 'test') details.push(`${prefix}type must be one of: live, test`);
}

export function createHandlers(deps: TenancyDeps): Handlers<typeof TenancyServiceService> {
  const { sql, credentialsKey, usage } = deps;
  const changedSubject = subjectFor(deps.eventsPrefix, 'tenancy.tenant_changed');

  async function tenantChanged(tx: TransactionSql, tenantId: string, reason: string) {
    const data = TenantChanged.encode({ tenantId, reason, occurredAt: new Date().toISOString() }).finish();
    await writeOutbox(tx, { subject: changedSubject, data });
  }

  async function writePools(tx: TransactionSql, tenantId: string, pools: ProviderPoolUpdate[]) {
    for (const p of pools) {
      if (p.remove) await store.deletePool(tx, tenantId, p.provider);
      else {
        const blob = encryptSecret(credentialsKey, JSON.stringify(p.keys), `${tenantId}:${p.provider}`);
        await store.upsertPool(tx, tenantId, p.provider, blob, p.keys.length);
      }
    }
  }

  async function newKey(tx: TransactionSql, tenantId: string, name: string, type: 'live' | 'test'): Promise<CreatedApiKey> {
    const key = generateApiKey(type);
    const { prefix, suffix } = keyDisplayParts(key);
    const row = await store.insertKey(tx, {
      keyId: randomId('key_'),
      tenantId,
      hash: sha256Hex(key),
      prefix,
      suffix,
      name: name.trim(),
      type,
    });
    return { apiKey: key, keyName: row.key_name, type: row.type, keyId: row.key_id, createdAt: row.created_at.toISOString() };
  }

  async function detail(db: Sql | TransactionSql, tenantId: string): Promise<TenantDetail> {
    const t = await store.findTenant(db, tenantId);
    if (!t) throw tenantNotFound();
    const [keys, pools] = await Promise.all([store.listKeys(db, tenantId), store.providerPools(db, tenantId)]);
    return {
      tenant: store.toTenant(t),
      apiKeys: keys.map(store.toKeyRecord),
      providers: pools.map((p) => ({ provider: p.provider, keyCount: p.key_count })),
    };
  }

  /** 23505 on the active-name index: a duplicate key name. */
  function mapKeyConflict(err: unknown, name: string): never {
    if ((err as { code?: string; constraint_name?: string }).code === '23505') {
      throw conflict(`API key with name ${name.trim()} already exists for this tenant`);
    }
    throw err;
  }

  async function createSession(db: Sql | TransactionSql, userId: string, ip?: string, userAgent?: string) {
    const token = randomToken('adms_');
    const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
    await store.insertSession(db, { sessionId: randomId('ses_'), tokenHash: sha256Hex(token), userId, expiresAt, ip, userAgent });
    return { token, expiresAt: expiresAt.toISOString() };
  }

  function checkPassword(details: string[], password: string) {
    if (typeof password !== 'string' || password.length === 0) details.push('password is required');
    else if (password.length < MIN_PASSWORD_LENGTH) details.push(`password must be at least ${MIN_PASSWORD_LENGTH} characters`);
    else if (password.length > MAX_PASSWORD_LENGTH) details.push(`password must be at most ${MAX_PASSWORD_LENGTH} characters`);
  }

  function checkDisplayName(details: string[], name: string) {
    const n = (name ?? '').trim();
    if (n.length === 0) details.push('display_name is required');
    else if (n.length > 100) details.push('display_name must be at most 100 characters');
  }

  return {
    // ---------------- API keys ----------------
    async authenticateApiKey(req) {
      const row = await store.authenticateKey(sql, req.keyHash);
      if (!row) throw unauthorized();
      usage.record(req.keyHash, 1);
      return {
        tenantId: row.tenant_id,
        keyType: row.type,
        keyName: row.key_name,
        tenantActive: row.tenant_active,
        rateLimitPerMinute: row.rate_limit_per_minute,
        keyId: row.key_id,
      };
    },

    async recordApiKeyUsage(req) {
      for (const u of req.uses) usage.record(u.keyHash, u.count, u.lastUsedAt ? new Date(u.lastUsedAt) : undefined);
      return {};
    },

    // ---------------- tenants ----------------
    async getTenant(req) {
      const t = await store.findTenant(sql, normalizeTenantId(req.tenantId));
      if (!t) throw tenantNotFound();
      return store.toTenant(t);
    },

    async listTenants() {
      return { tenants: (await store.listTenants(sql)).map(store.toTenant) };
    },

    async getTenantDetail(req) {
      return detail(sql, normalizeTenantId(req.tenantId));
    },

    async createTenant(req) {
      const details: string[] = [];
      const tenantId = normalizeTenantId(req.tenantId);
      if (!tenantId) details.push('tenant_id is required');
      else if (!TENANT_ID.test(tenantId)) {
        details.push('tenant_id must be 1-64 lowercase letters, digits, hyphens or underscores, starting with a letter or digit');
      }
      const name = (req.tenantName ?? '').trim();
      if (!name) details.push('tenant_name is required');
      else if (name.length > 200) details.push('tenant_name must be at most 200 characters');
      const email = (req.contactEmail ?? '').trim();
      if (!email) details.push('contact_email is required');
      else if (!EMAIL.test(email) || email.length > 320) details.push('contact_email must be a valid email address');
      if (req.monthlyQuotaMb !== undefined && req.monthlyQuotaMb < 1) details.push('monthly_quota_mb must be >= 1');
      if (req.rateLimitPerMinute !== undefined && req.rateLimitPerMinute < 1) details.push('rate_limit_per_minute must be >= 1');
      if (req.notes !== undefined && req.notes.length > 2000) details.push('notes must be at most 2000 characters');
      const pools = checkPools(details, req.providerPools).filter((p) => !p.remove);
      if (pools.length === 0)
        details.push('At least one provider key is required (provider_credentials.provA or provider_credentials.provB)');
      const configured = new Set(pools.map((p) => p.provider as Provider));
      const allowed = req.hasAllowedModels ? [...new Set(req.allowedModels)] : MODEL_IDS.filter((m) => configured.has(providerOfModel(m)));
      checkModels(details, req.modelId, req.hasAllowedModels ? allowed : undefined);
      const modelId = req.modelId ?? (allowed.includes(DEFAULT_MODEL) ? DEFAULT_MODEL : (allowed[0] ?? DEFAULT_MODEL));
      if (details.length === 0 && !allowed.includes(modelId)) details.push('model_id must be one of allowed_models');
      const keySpecs = req.hasApiKeys
        ? req.apiKeys.map((k) => ({ keyName: k.keyName, type: k.type || 'live' }))
        : [
            { keyName: 'Default live key', type: 'live' },
            { keyName: 'Default test key', type: 'test' },
          ];
      if (keySpecs.length > MAX_API_KEYS) details.push(`api_keys must have at most ${MAX_API_KEYS} items`);
      keySpecs.forEach((k, i) => {
        checkKeySpec(details, k.keyName, k.type, `api_keys.${i}.`);
      });
      const names = keySpecs.map((k) => (k.keyName ?? '').trim());
      if (new Set(names).size !== names.length) details.push('api_keys key_name values must be unique');
      if (details.length) throw invalidPayload(details);

      try {
        return await sql.begin(async (tx) => {
          const [row] = await tx`
            INSERT INTO tenants (tenant_id, tenant_name, contact_email, monthly_quota_mb, rate_limit_per_minute, notes, model_id, allowed_models)
            VALUES (${tenantId}, ${name}, ${email}, ${req.monthlyQuotaMb ?? DEFAULT_QUOTA_MB},
              ${req.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT}, ${req.notes ?? null}, ${modelId}, ${allowed})
            ON CONFLICT (tenant_id) DO NOTHING
            RETURNING *`;
          if (!row) throw conflict(`Tenant ${tenantId} already exists`);
          await writePools(tx, tenantId, pools);
          const apiKeys: CreatedApiKey[] = [];
          for (const k of keySpecs) apiKeys.push(await newKey(tx, tenantId, k.keyName, k.type as 'live' | 'test'));
          await tenantChanged(tx, tenantId, 'created');
          return { tenant: store.toTenant(row), apiKeys };
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
      if (name !== undefined && (name.length === 0 || name.length > 200)) details.push('tenant_name must be between 1 and 200 characters');
      const email = req.contactEmail?.trim();
      if (email !== undefined && (!EMAIL.test(email) || email.length > 320)) details.push('contact_email must be a valid email address');
      if (req.monthlyQuotaMb !== undefined && req.monthlyQuotaMb < 1) details.push('monthly_quota_mb must be >= 1');
      if (req.rateLimitPerMinute !== undefined && req.rateLimitPerMinute < 1) details.push('rate_limit_per_minute must be >= 1');
      if (req.notes !== undefined && req.notes.length > 2000) details.push('notes must be at most 2000 characters');
      const allowedIn = req.hasAllowedModels ? [...new Set(req.allowedModels)] : undefined;
      checkModels(details, req.modelId, allowedIn);
      const pools = checkPools(details, req.providerPools);
      if (details.length) throw invalidPayload(details);

      return sql.begin(async (tx) => {
        const cur = await store.findTenant(tx, tenantId, true);
        if (!cur) throw tenantNotFound();
        const allowed: string[] = allowedIn ?? cur.allowed_models;
        const modelId = req.modelId ?? cur.model_id;
        if (!allowed.includes(modelId)) {
          throw invalidPayload([
            req.modelId !== undefined
              ? 'model_id must be one of allowed_models'
              : `allowed_models must include the tenant's model_id (${modelId})`,
          ]);
        }
        if (pools.length) {
          const existing = new Set((await store.providerPools(tx, tenantId)).map((p) => p.provider as string));
          for (const p of pools) {
            if (p.remove) existing.delete(p.provider);
            else existing.add(p.provider);
          }
          if (existing.size === 0)
            throw invalidPayload(['At least one provider key is required; a tenant cannot remove its last provider']);
          await writePools(tx, tenantId, pools);
        }
        const [row] = await tx`
          UPDATE tenants SET
            tenant_name = ${name ?? cur.tenant_name},
            contact_email = ${email ?? cur.contact_email},
            is_active = ${req.isActive ?? cur.is_active},
            monthly_quota_mb = ${req.monthlyQuotaMb ?? cur.monthly_quota_mb},
            rate_limit_per_minute = ${req.rateLimitPerMinute ?? cur.rate_limit_per_minute},
            notes = ${req.clearNotes ? null : (req.notes ?? cur.notes)},
            model_id = ${modelId},
            allowed_models = ${allowed},
            updated_at = now()
          WHERE tenant_id = ${tenantId} RETURNING *`;
        const reason =
          req.isActive === false && cur.is_active ? 'deactivated' : req.isActive === true && !cur.is_active ? 'activated' : 'updated';
        await tenantChanged(tx, tenantId, reason);
        void row;
        return detail(tx, tenantId);
      });
    },

    async createApiKey(req) {
      const tenantId = normalizeTenantId(req.tenantId);
      const details: string[] = [];
      const type = req.type || 'live';
      checkKeySpec(details, req.keyName, type);
      if (details.length) throw invalidPayload(details);
      try {
        return await sql.begin(async (tx) => {
          if (!(await store.findTenant(tx, tenantId, true))) throw tenantNotFound();
          const [{ n }] = await tx`SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = ${tenantId} AND is_active`;
          if (n >= MAX_API_KEYS) {
            throw badRequest(`API key limit reached: a tenant can have at most ${MAX_API_KEYS} active API keys`, [
              'revoke a key (DELETE /admin/tenants/:tenantId/api-keys/:keyId) before creating another',
            ]);
          }
          const created = await newKey(tx, tenantId, req.keyName, type as 'live' | 'test');
          await tenantChanged(tx, tenantId, 'api_key_created');
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
        if (!(await store.findTenant(tx, tenantId, true))) throw tenantNotFound();
        // By id first, then the active key of that name, then the latest revoked one of that name.
        const [key] = await tx`
          SELECT * FROM api_keys WHERE tenant_id = ${tenantId} AND (key_id = ${ref} OR key_name = ${ref})
          ORDER BY (key_id = ${ref}) DESC, is_active DESC, created_at DESC LIMIT 1`;
        if (!key) throw notFound('API key not found');
        if (!key.is_active) return store.toKeyRecord(key);
        const [row] = await tx`
          UPDATE api_keys SET is_active = false, revoked_at = now() WHERE key_id = ${key.key_id} RETURNING *`;
        await tenantChanged(tx, tenantId, 'api_key_revoked');
        return store.toKeyRecord(row);
      });
    },

    async getProviderCredentials(req, ctx: CallContext) {
      const tenantId = normalizeTenantId(req.tenantId || ctx.principal.tenantId || '');
      const [row] = await sql`
        SELECT encrypted FROM provider_credentials WHERE tenant_id = ${tenantId} AND provider = ${req.provider}`;
      if (!row) {
        if (!(await store.findTenant(sql, tenantId))) throw tenantNotFound();
        return { keys: [] };
      }
      return { keys: JSON.parse(decryptSecret(credentialsKey, row.encrypted, `${tenantId}:${req.provider}`)) };
    },

    async getTenantStats() {
      const rows = await sql`SELECT tenant_id, tenant_name, is_active, created_at FROM tenants ORDER BY tenant_id`;
      const active = rows.filter((r) => r.is_active).length;
      const since = Date.now() - 30 * 86_400_000;
      return {
        total: rows.length,
        active,
        inactive: rows.length - active,
        createdLast30d: rows.filter((r) => new Date(r.created_at).getTime() >= since).length,
        tenantNames: rows.map((r) => ({ tenantId: r.tenant_id, tenantName: r.tenant_name, isActive: r.is_active })),
      };
    },

    // ---------------- admin sign-in ----------------
    async adminLogin(req) {
      const email = normalizeEmail(req.email);
      const password = typeof req.password === 'string' ? req.password : '';
      const user = email ? await store.findUserByEmail(sql, email) : undefined;
      if (!user) {
        // Same work as a real check: one scrypt verification and one small write.
        await verifyPassword(password, deps.dummyPasswordHash);
        await sql`UPDATE admin_users SET failed_login_attempts = failed_login_attempts WHERE false`;
        throw unauthorized(INVALID_LOGIN);
      }
      const ok = await verifyPassword(password, user.password_hash);
      const locked = user.locked_until != null && new Date(user.locked_until).getTime() > Date.now();
      if (!ok) {
        await sql`
          UPDATE admin_users SET failed_login_attempts = failed_login_attempts + 1,
            locked_until = CASE WHEN failed_login_attempts + 1 >= ${MAX_FAILED_LOGINS}
              THEN GREATEST(COALESCE(locked_until, now()), now() + ${`${LOCKOUT_MS} milliseconds`}::interval) ELSE locked_until END
          WHERE user_id = ${user.user_id}`;
        throw unauthorized(INVALID_LOGIN);
      }
      // Only someone who knows the password learns that the account exists but is locked.
      const lockedError = () =>
        new AppError(423, {
          error: `Account locked after ${MAX_FAILED_LOGINS} failed sign-in attempts; ask a super_admin to unlock it or try again later`,
        });
      if (locked) throw lockedError();
      if (!user.is_active) throw unauthorized(INVALID_LOGIN);
      return sql.begin(async (tx) => {
        // Checked again in the UPDATE: failed attempts (or a deactivation) that landed during the slow
        // password check must not be wiped out by this success.
        const [row] = await tx`
          UPDATE admin_users SET failed_login_attempts = 0, locked_until = NULL, last_login_at = now()
          WHERE user_id = ${user.user_id} AND is_active AND (locked_until IS NULL OR locked_until <= now()) RETURNING *`;
        if (!row) {
          const [now] = await tx`SELECT is_active, locked_until > now() AS locked FROM admin_users WHERE user_id = ${user.user_id}`;
          throw now?.is_active && now.locked ? lockedError() : unauthorized(INVALID_LOGIN);
        }
        const s = await createSession(tx, user.user_id, req.ip || undefined, req.userAgent || undefined);
        return { ...s, user: store.toAdminUser(row) } satisfies AdminSession;
      });
    },

    async adminLogout(req) {
      const r = await sql`UPDATE admin_sessions SET revoked_at = now() WHERE token_hash = ${req.tokenHash} AND revoked_at IS NULL`;
      return { revoked: r.count > 0 };
    },

    async authenticateAdminSession(req) {
      const [row] = await sql`
        SELECT u.user_id, u.email, u.role, u.display_name, s.expires_at
        FROM admin_sessions s JOIN admin_users u ON u.user_id = s.user_id
        WHERE s.token_hash = ${req.tokenHash} AND s.revoked_at IS NULL AND s.expires_at > now() AND u.is_active`;
      if (!row) throw unauthorized('Invalid or expired admin session');
      return {
        userId: row.user_id,
        email: row.email,
        role: row.role,
        displayName: row.display_name,
        sessionExpiresAt: row.expires_at.toISOString(),
      };
    },

    // ---------------- admin users ----------------
    async getAdminUser(req) {
      const u = await store.findUser(sql, req.userId);
      if (!u) throw userNotFound();
      return store.toAdminUser(u);
    },

    async listAdminUsers() {
      const rows = await sql`SELECT * FROM admin_users ORDER BY created_at, user_id`;
      return { users: rows.map(store.toAdminUser) };
    },

    async updateAdminUser(req) {
      const details: string[] = [];
      if (req.displayName !== undefined) checkDisplayName(details, req.displayName);
      if (req.role !== undefined && !(ADMIN_ROLES as readonly string[]).includes(req.role)) {
        details.push('role must be one of: admin, super_admin');
      }
      if (details.length) throw invalidPayload(details);
      return sql.begin(async (tx) => {
        // One writer at a time decides the "last active super_admin" rule.
        await tx`SELECT pg_advisory_xact_lock(hashtext('tenancy:admin-users'))`;
        const cur = await store.findUser(tx, req.userId, true);
        if (!cur) throw userNotFound();
        const role = req.role ?? cur.role;
        const isActive = req.isActive ?? cur.is_active;
        const losesSuper = cur.role === 'super_admin' && cur.is_active && (role !== 'super_admin' || !isActive);
        if (losesSuper) {
          const [{ n }] = await tx`
            SELECT count(*)::int AS n FROM admin_users WHERE role = 'super_admin' AND is_active AND user_id <> ${cur.user_id}`;
          if (n === 0) throw conflict('Cannot demote or deactivate the last active super_admin');
        }
        const [row] = await tx`
          UPDATE admin_users SET display_name = ${req.displayName?.trim() ?? cur.display_name}, role = ${role},
            is_active = ${isActive}, updated_at = now()
          WHERE user_id = ${cur.user_id} RETURNING *`;
        if (!isActive) {
          await tx`UPDATE admin_sessions SET revoked_at = now() WHERE user_id = ${cur.user_id} AND revoked_at IS NULL`;
        }
        return store.toAdminUser(row);
      });
    },

    async unlockAdminUser(req) {
      const [row] = await sql`
        UPDATE admin_users SET failed_login_attempts = 0, locked_until = NULL, updated_at = now()
        WHERE user_id = ${req.userId} RETURNING *`;
      if (!row) throw userNotFound();
      return store.toAdminUser(row);
    },

    // ---------------- invitations ----------------
    async createInvitation(req, ctx) {
      const details: string[] = [];
      const email = normalizeEmail(req.email);
      if (!email) details.push('email is required');
      else if (!EMAIL.test(email) || email.length > 320) details.push('email must be a valid email address');
      const role = req.role || 'admin';
      if (!(ADMIN_ROLES as readonly string[]).includes(role)) details.push('role must be one of: admin, super_admin');
      const days = req.expiresInDays || DEFAULT_INVITATION_DAYS;
      if (days < 1 || days > MAX_INVITATION_DAYS) details.push(`expires_in_days must be between 1 and ${MAX_INVITATION_DAYS}`);
      if (details.length) throw invalidPayload(details);
      const tenantId = req.tenantId ? normalizeTenantId(req.tenantId) : undefined;
      if (tenantId && !(await store.findTenant(sql, tenantId))) throw tenantNotFound();
      if (await store.findUserByEmail(sql, email)) throw conflict('An admin user with this email already exists');
      const token = randomToken('inv_');
      const [row] = await sql`
        INSERT INTO invitations (token, email, role, tenant_id, invited_by, expires_at)
        VALUES (${token}, ${email}, ${role}, ${tenantId ?? null}, ${ctx.principal.adminUserId ?? 'admin_token'},
          now() + ${`${days} days`}::interval)
        RETURNING *`;
      return store.toInvitation(row);
    },

    async listInvitations(req) {
      const rows = await sql`SELECT * FROM invitations ORDER BY created_at DESC, token`;
      const all = rows.map(store.toInvitation);
      return { invitations: req.status ? all.filter((i) => i.status === req.status) : all };
    },

    async getInvitation(req) {
      const [row] = await sql`SELECT * FROM invitations WHERE token = ${req.token}`;
      if (!row) throw invitationNotFound();
      return store.toInvitation(row);
    },

    async revokeInvitation(req) {
      return sql.begin(async (tx) => {
        const [cur] = await tx`SELECT * FROM invitations WHERE token = ${req.token} FOR UPDATE`;
        if (!cur) throw invitationNotFound();
        if (cur.accepted_at) throw conflict('Invitation has already been accepted and cannot be revoked');
        if (cur.revoked_at) return store.toInvitation(cur);
        const [row] = await tx`UPDATE invitations SET revoked_at = now() WHERE token = ${req.token} RETURNING *`;
        return store.toInvitation(row);
      });
    },

    async acceptInvitation(req) {
      const check = (r: Record<string, any> | undefined) => {
        if (!r) throw invitationNotFound();
        const status = store.invitationStatus(r);
        if (status === 'revoked') throw gone('Invitation has been revoked');
        if (status === 'accepted') throw gone('Invitation has already been used');
        if (status === 'expired') throw gone('Invitation has expired');
      };
      const [first] = await sql`SELECT * FROM invitations WHERE token = ${req.token}`;
      check(first);
      const details: string[] = [];
      checkDisplayName(details, req.displayName);
      checkPassword(details, req.password);
      if (details.length) throw invalidPayload(details);
      const passwordHash = await hashPassword(req.password);
      const emailTaken = () => conflict('An admin user with this email already exists');
      try {
        return await sql.begin(async (tx) => {
          const [inv] = await tx`SELECT * FROM invitations WHERE token = ${req.token} FOR UPDATE`;
          check(inv);
          if (await store.findUserByEmail(tx, inv.email)) throw emailTaken();
          const userId = randomId('usr_');
          const [user] = await tx`
            INSERT INTO admin_users (user_id, email, display_name, role, password_hash, tenant_id, last_login_at)
            VALUES (${userId}, ${inv.email}, ${req.displayName.trim()}, ${inv.role}, ${passwordHash}, ${inv.tenant_id}, now())
            RETURNING *`;
          await tx`UPDATE invitations SET accepted_at = now(), accepted_user_id = ${userId} WHERE token = ${inv.token}`;
          const s = await createSession(tx, userId);
          return { ...s, user: store.toAdminUser(user) };
        });
      } catch (err) {
        // Two invitations of one email accepted at the same time: both pass the look-up above, the unique
        // email index decides, and the loser gets the same 409 as a sequential second accept (not a 500).
        if ((err as { code?: string }).code === '23505') throw emailTaken();
        throw err;
      }
    },
  };
}
