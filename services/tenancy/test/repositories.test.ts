import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createDb, createTestDatabase, migrate, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invitationStatus, isLocked } from '../src/domain.js';
import * as adminSessions from '../src/repositories/admin-sessions.js';
import * as adminUsers from '../src/repositories/admin-users.js';
import * as apiKeys from '../src/repositories/api-keys.js';
import * as invitations from '../src/repositories/invitations.js';
import * as providerCredentials from '../src/repositories/provider-credentials.js';
import * as tenants from '../src/repositories/tenants.js';

let db: { url: string; drop: () => Promise<void> };
let sql: Sql;
const credentialsKey = randomBytes(32);

const settings = {
  tenantName: 'Repo',
  contactEmail: 'ops@repo.test',
  monthlyQuotaMb: 100,
  rateLimitPerMinute: 5,
  notes: null,
  modelId: 'provA-flash-image',
  allowedModels: ['provA-flash-image'],
  credentialsIncludePrompt: false,
};

beforeAll(async () => {
  db = await createTestDatabase(undefined, 'tenancy_repo');
  sql = createDb(db.url, { schema: 'tenancy', max: 2 });
  await migrate(sql, 'tenancy', fileURLToPath(new URL('../migrations', import.meta.url)));
});

afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

describe('tenancy repositories', () => {
  it('reads tenants back as domain objects (Dates, null notes) and refuses a taken id', async () => {
    const t = await tenants.insertTenant(sql, 'repo', settings);
    expect(t).toMatchObject({ tenantId: 'repo', isActive: true, notes: null, allowedModels: ['provA-flash-image'] });
    expect(t?.createdAt).toBeInstanceOf(Date);
    expect(await tenants.insertTenant(sql, 'repo', settings)).toBeUndefined();
    const updated = await tenants.updateTenant(sql, 'repo', { ...settings, notes: 'n', isActive: false });
    expect(updated).toMatchObject({ notes: 'n', isActive: false });
    expect(await tenants.updateTenant(sql, 'nope', { ...settings, isActive: true })).toBeUndefined();
    expect(await tenants.findTenant(sql, 'nope')).toBeUndefined();
    const [summary] = await tenants.listTenantSummaries(sql);
    expect(summary).toEqual({ tenantId: 'repo', tenantName: 'Repo', isActive: false, createdAt: expect.any(Date) });
  });

  it('keys: counters as numbers, look-up by id or name, revocation', async () => {
    const key = await apiKeys.insertKey(sql, {
      keyId: 'key_1',
      tenantId: 'repo',
      hash: 'h1',
      prefix: 'sk_live_AbCd',
      suffix: 'wXyZ',
      name: 'main',
      type: 'live',
    });
    expect(key).toMatchObject({ keyId: 'key_1', usageCount: 0, lastUsedAt: null, revokedAt: null, isActive: true });
    await apiKeys.addKeyUses(sql, [{ h: 'h1', c: 3, l: new Date().toISOString() }]);
    const [listed] = await apiKeys.listKeys(sql, 'repo');
    expect(listed.usageCount).toBe(3);
    expect(listed.lastUsedAt).toBeInstanceOf(Date);
    expect(await apiKeys.authenticateKey(sql, 'h1')).toEqual({
      keyId: 'key_1',
      tenantId: 'repo',
      type: 'live',
      keyName: 'main',
      tenantActive: false,
      rateLimitPerMinute: 5,
      signatureRequired: false,
    });
    expect(await apiKeys.countActiveKeys(sql, 'repo')).toBe(1);
    expect((await apiKeys.findKeyByRef(sql, 'repo', 'main'))?.keyId).toBe('key_1');
    const revoked = await apiKeys.revokeKey(sql, 'key_1');
    expect(revoked.isActive).toBe(false);
    expect(revoked.revokedAt).toBeInstanceOf(Date);
    expect(await apiKeys.authenticateKey(sql, 'h1')).toBeUndefined();
    expect(await apiKeys.countActiveKeys(sql, 'repo')).toBe(0);
  });

  it('provider pools: stored encrypted, read back decrypted, bound to their tenant and provider', async () => {
    await providerCredentials.savePool(sql, credentialsKey, 'repo', 'provA', ['secret-1', 'secret-2']);
    expect(await providerCredentials.listPools(sql, 'repo')).toEqual([{ provider: 'provA', keyCount: 2 }]);
    expect(await providerCredentials.readPoolKeys(sql, credentialsKey, 'repo', 'provA')).toEqual(['secret-1', 'secret-2']);
    expect(await providerCredentials.readPoolKeys(sql, credentialsKey, 'repo', 'provB')).toBeUndefined();
    const [{ encrypted }] = await sql<{ encrypted: Buffer }[]>`SELECT encrypted FROM provider_credentials WHERE tenant_id = 'repo'`;
    expect(encrypted.toString('latin1')).not.toContain('secret-1');
    await providerCredentials.deletePool(sql, 'repo', 'provA');
    expect(await providerCredentials.listPools(sql, 'repo')).toEqual([]);
  });

  it('admin users: failed sign-ins lock, a success clears only an unlocked user, sessions', async () => {
    expect(await adminUsers.insertBootstrapAdmin(sql, { userId: 'usr_1', email: 'Boss@Repo.test', passwordHash: 'x' })).toBe(true);
    expect(await adminUsers.insertBootstrapAdmin(sql, { userId: 'usr_2', email: 'boss@repo.test', passwordHash: 'x' })).toBe(false);
    const user = await adminUsers.findUserByEmail(sql, 'BOSS@repo.test');
    expect(user).toMatchObject({ userId: 'usr_1', role: 'super_admin', lockedUntil: null, tenantId: null, failedLoginAttempts: 0 });
    await adminUsers.writeNothing(sql);
    for (let i = 0; i < 2; i++) await adminUsers.recordFailedLogin(sql, 'usr_1', { maxAttempts: 2, lockoutMs: 60_000 });
    const locked = await adminUsers.findUser(sql, 'usr_1');
    expect(locked?.failedLoginAttempts).toBe(2);
    expect(locked && isLocked(locked)).toBe(true);
    expect(await adminUsers.recordSuccessfulLogin(sql, 'usr_1')).toBeUndefined();
    expect(await adminUsers.loginState(sql, 'usr_1')).toEqual({ isActive: true, locked: true });
    const unlocked = await adminUsers.unlockUser(sql, 'usr_1');
    expect(unlocked && isLocked(unlocked)).toBe(false);
    expect(await adminUsers.loginState(sql, 'usr_1')).toEqual({ isActive: true, locked: false });
    expect((await adminUsers.recordSuccessfulLogin(sql, 'usr_1'))?.lastLoginAt).toBeInstanceOf(Date);
    expect(await adminUsers.countOtherActiveSuperAdmins(sql, 'usr_1')).toBe(0);

    await adminSessions.insertSession(sql, {
      sessionId: 'ses_1',
      tokenHash: 't1',
      userId: 'usr_1',
      expiresAt: new Date(Date.now() + 60_000),
    });
    expect(await adminSessions.findSessionUser(sql, 't1')).toEqual({
      userId: 'usr_1',
      email: 'Boss@Repo.test', // stored as given: the service normalizes emails before
      role: 'super_admin',
      displayName: 'Administrator',
      expiresAt: expect.any(Date),
    });
    expect(await adminSessions.revokeSession(sql, 't1')).toBe(true);
    expect(await adminSessions.revokeSession(sql, 't1')).toBe(false);
    expect(await adminSessions.findSessionUser(sql, 't1')).toBeUndefined();
  });

  it('invitations: status from the stored timestamps, acceptance and revocation', async () => {
    const inv = await invitations.insertInvitation(sql, {
      token: 'inv_1',
      email: 'new@repo.test',
      role: 'admin',
      tenantId: null,
      invitedBy: 'usr_1',
      days: 7,
    });
    expect(inv).toMatchObject({ token: 'inv_1', tenantId: null, acceptedAt: null, revokedAt: null });
    expect(inv.expiresAt.getTime() - inv.createdAt.getTime()).toBe(7 * 86_400_000);
    expect(invitationStatus(inv)).toBe('pending');
    expect(invitationStatus(inv, inv.expiresAt.getTime())).toBe('expired');
    const user = await adminUsers.insertUser(sql, {
      userId: 'usr_3',
      email: inv.email,
      displayName: 'New',
      role: inv.role,
      passwordHash: 'x',
      tenantId: null,
    });
    expect(user.lastLoginAt).toBeInstanceOf(Date);
    await invitations.markAccepted(sql, 'inv_1', 'usr_3');
    const accepted = await invitations.findInvitation(sql, 'inv_1');
    expect(accepted?.acceptedUserId).toBe('usr_3');
    expect(accepted && invitationStatus(accepted)).toBe('accepted');
    await invitations.insertInvitation(sql, {
      token: 'inv_2',
      email: 'x@repo.test',
      role: 'super_admin',
      tenantId: 'repo',
      invitedBy: 'usr_1',
      days: 1,
    });
    const revoked = await invitations.revokeInvitation(sql, 'inv_2');
    expect(invitationStatus(revoked)).toBe('revoked');
    expect((await invitations.listInvitations(sql)).map((i) => i.token)).toEqual(['inv_2', 'inv_1']);
  });
});
