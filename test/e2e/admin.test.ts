import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';

/**
 * Administration through the gateway (issue 7): sign-in, sessions, roles, users, lockout,
 * invitations, stats, and 401/403 on every admin route.
 */
let s: TestStack;
let db: Sql;
let tenant: TestTenant;
let rootToken: string;
let rootId: string;
let adminToken: string; // role admin
let adminId: string;
let seq = 0;
const email = () => `user${Date.now().toString(36)}${++seq}@example.com`;
const PASSWORD = 'a long enough password';

/** Every request from its own client address: the gateway rate-limits /admin/* per cf-connecting-ip. */
const randomIp = () => `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 254) + 1}`;
const api: TestStack['api'] = (path, init = {}) =>
  s.api(path, { ...init, headers: { 'cf-connecting-ip': randomIp(), ...(init.headers ?? {}) } });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const as = (token: string, path: string, init: { method?: string; body?: unknown } = {}) => api(path, { ...init, headers: bearer(token) });

async function login(mail: string, password: string) {
  return api('/admin/auth/login', { body: { email: mail, password } });
}

/** Invites `role` and accepts: returns the new user's id and session token. */
async function newUser(role: 'admin' | 'super_admin', mail = email()) {
  const inv = await api('/admin/invitations', { admin: true, body: { email: mail, role } });
  expect(inv.status).toBe(200);
  const acc = await api(`/admin/invitations/${inv.body.data.token}/accept`, {
    body: { display_name: `User ${mail}`, password: PASSWORD },
  });
  expect(acc.status).toBe(200);
  return { userId: acc.body.data.user.userId as string, token: acc.body.data.token as string, email: mail };
}

beforeAll(async () => {
  s = await startTestStack();
  db = createDb(s.env.DATABASE_URL, { schema: 'tenancy', max: 1 });
  tenant = await s.createTenant();
  const r = await login(s.adminEmail, s.adminPassword);
  expect(r.status).toBe(200);
  rootToken = r.body.data.token;
  rootId = r.body.data.user.userId;
  const u = await newUser('admin');
  adminToken = u.token;
  adminId = u.userId;
});

afterAll(async () => {
  await db?.end();
  await s?.stop();
});

describe('sign-in and sessions', () => {
  it('signs in the configured super_admin and reports who is signed in', async () => {
    const r = await login(s.adminEmail.toUpperCase(), s.adminPassword);
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({
      token: expect.stringMatching(/^adms_/),
      tokenType: 'Bearer',
      expiresAt: expect.any(String),
      user: { email: s.adminEmail, role: 'super_admin', isActive: true, lastLoginAt: expect.any(String) },
    });
    expect(Date.parse(r.body.data.expiresAt)).toBeGreaterThan(Date.now());
    const me = await as(r.body.data.token, '/admin/me');
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ authMethod: 'session', role: 'super_admin', user: { userId: rootId } });
    const legacy = await api('/admin/me', { admin: true });
    expect(legacy.body.data).toMatchObject({ authMethod: 'admin_token', role: 'super_admin', user: null });
  });

  it('answers a wrong password and an unknown email alike', async () => {
    const wrong = await login(s.adminEmail, 'not the password');
    const unknown = await login('nobody@example.com', 'not the password');
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body).toEqual(unknown.body);
    expect(wrong.body).toEqual({ error: 'Invalid email or password' });
    // Reset the failure counter of root (sign in successfully).
    expect((await login(s.adminEmail, s.adminPassword)).status).toBe(200);
  });

  it('validates the login body', async () => {
    const r = await api('/admin/auth/login', { body: { email: 'x@example.com' } });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: 'Invalid request payload', details: ['password is required'] });
  });

  it('logs out: the token stops working at once', async () => {
    const t = (await login(s.adminEmail, s.adminPassword)).body.data.token;
    expect((await as(t, '/admin/me')).status).toBe(200);
    const out = await as(t, '/admin/auth/logout', { method: 'POST' });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ data: { success: true } });
    expect((await as(t, '/admin/me')).status).toBe(401);
    expect((await api('/admin/auth/logout', { method: 'POST', admin: true })).status).toBe(400);
  });

  it('locks an account after 5 failed sign-ins until a super_admin unlocks it', async () => {
    const u = await newUser('admin');
    for (let i = 0; i < 5; i++) expect((await login(u.email, 'wrong password!')).status).toBe(401);
    const locked = await login(u.email, PASSWORD);
    expect(locked.status).toBe(423);
    expect(locked.body.error).toContain('locked');
    // Wrong passwords on a locked account still look like any other failure.
    expect((await login(u.email, 'wrong password!')).body).toEqual({ error: 'Invalid email or password' });
    const listed = (await api('/admin/users', { admin: true })).body.data.find((x: any) => x.userId === u.userId);
    expect(listed).toMatchObject({ isLocked: true, failedLoginAttempts: 6 });
    const un = await as(rootToken, `/admin/users/${u.userId}/unlock`, { method: 'POST' });
    expect(un.status).toBe(200);
    expect(un.body.data).toMatchObject({ success: true, userId: u.userId, message: expect.any(String) });
    const after = (await api(`/admin/users/${u.userId}`, { admin: true })).body.data;
    expect(after).toMatchObject({ isLocked: false, failedLoginAttempts: 0 });
    expect((await login(u.email, PASSWORD)).status).toBe(200);
    expect((await api('/admin/users/usr_unknown/unlock', { method: 'POST', admin: true })).status).toBe(404);
  });
});

describe('admin users', () => {
  it('lists users with the SPEC fields', async () => {
    const r = await as(adminToken, '/admin/users');
    expect(r.status).toBe(200);
    const root = r.body.data.find((u: any) => u.userId === rootId);
    expect(root).toMatchObject({ email: s.adminEmail, displayName: expect.any(String), role: 'super_admin', isActive: true });
    expect(root).toHaveProperty('lastLoginAt');
    expect(JSON.stringify(r.body)).not.toContain('scrypt');
  });

  it('updates display name and role', async () => {
    const u = await newUser('admin');
    const r = await as(rootToken, `/admin/users/${u.userId}`, { method: 'PATCH', body: { display_name: 'Renamed', role: 'super_admin' } });
    expect(r.status).toBe(200);
    expect(r.body.data.user).toMatchObject({ userId: u.userId, role: 'super_admin', isActive: true, updatedAt: expect.any(String) });
    // The role applies to the existing session at once.
    expect((await as(u.token, '/admin/users/usr_nope/unlock', { method: 'POST' })).status).toBe(404);
    const bad = await as(rootToken, `/admin/users/${u.userId}`, { method: 'PATCH', body: { role: 'owner' } });
    expect(bad.status).toBe(400);
    expect(bad.body.details).toEqual(['role must be one of: admin, super_admin']);
    expect((await as(rootToken, '/admin/users/usr_nope', { method: 'PATCH', body: { display_name: 'x' } })).status).toBe(404);
  });

  it("ends a deactivated admin's sessions at once", async () => {
    const u = await newUser('admin');
    expect((await as(u.token, '/admin/me')).status).toBe(200);
    const off = await as(rootToken, `/admin/users/${u.userId}`, { method: 'PATCH', body: { is_active: false } });
    expect(off.status).toBe(200);
    expect(off.body.data.user.isActive).toBe(false);
    const r = await as(u.token, '/admin/tenants');
    expect(r.status).toBe(401);
    expect((await login(u.email, PASSWORD)).status).toBe(401);
    await as(rootToken, `/admin/users/${u.userId}`, { method: 'PATCH', body: { is_active: true } });
    expect((await as(u.token, '/admin/me')).status).toBe(401); // old sessions stay revoked
    expect((await login(u.email, PASSWORD)).status).toBe(200);
  });

  it('never demotes or deactivates the last active super_admin', async () => {
    // Make root the only active super_admin: demote every other one.
    const users = (await api('/admin/users', { admin: true })).body.data;
    for (const u of users) {
      if (u.userId !== rootId && u.role === 'super_admin') {
        expect((await api(`/admin/users/${u.userId}`, { method: 'PATCH', admin: true, body: { role: 'admin' } })).status).toBe(200);
      }
    }
    for (const body of [{ role: 'admin' }, { is_active: false }]) {
      const r = await api(`/admin/users/${rootId}`, { method: 'PATCH', admin: true, body });
      expect(r.status).toBe(409);
      expect(r.body.error).toBe('Cannot demote or deactivate the last active super_admin');
    }
    // With a second super_admin, root may be demoted; then the other one is the last.
    const other = await newUser('super_admin');
    expect((await api(`/admin/users/${rootId}`, { method: 'PATCH', admin: true, body: { role: 'admin' } })).status).toBe(200);
    expect((await api(`/admin/users/${other.userId}`, { method: 'PATCH', admin: true, body: { is_active: false } })).status).toBe(409);
    expect((await api(`/admin/users/${rootId}`, { method: 'PATCH', admin: true, body: { role: 'super_admin' } })).status).toBe(200);
    expect((await as(rootToken, '/admin/me')).body.data.role).toBe('super_admin');
  });
});

describe('invitations', () => {
  it('creates with defaults, lists, and accepts into a signed-in user', async () => {
    const mail = email();
    const r = await api('/admin/invitations', { admin: true, body: { email: mail, tenant_id: tenant.tenantId } });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ token: expect.stringMatching(/^inv_/), email: mail, role: 'admin', tenantId: tenant.tenantId });
    const days = (Date.parse(r.body.data.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.9);
    expect(days).toBeLessThan(7.1);
    const list = await as(rootToken, '/admin/invitations');
    expect(list.status).toBe(200);
    expect(list.body.data.find((i: any) => i.token === r.body.data.token)).toMatchObject({
      email: mail,
      role: 'admin',
      tenantId: tenant.tenantId,
      status: 'pending',
      expiresAt: r.body.data.expiresAt,
      createdAt: expect.any(String),
    });
    const pub = await api(`/admin/invitations/${r.body.data.token}`);
    expect(pub.body.data).toMatchObject({ email: mail, status: 'pending' });
    const acc = await api(`/admin/invitations/${r.body.data.token}/accept`, { body: { display_name: 'New Admin', password: PASSWORD } });
    expect(acc.status).toBe(200);
    expect(acc.body.data).toMatchObject({
      token: expect.stringMatching(/^adms_/),
      user: { email: mail, role: 'admin', displayName: 'New Admin' },
    });
    expect((await as(acc.body.data.token, '/admin/me')).body.data.user.email).toBe(mail);
    expect((await login(mail, PASSWORD)).status).toBe(200);
    // Used: refused clearly.
    const again = await api(`/admin/invitations/${r.body.data.token}/accept`, { body: { display_name: 'X', password: PASSWORD } });
    expect(again.status).toBe(410);
    expect(again.body).toEqual({ error: 'Invitation has already been used' });
    const accepted = await api('/admin/invitations?status=accepted', { admin: true });
    expect(accepted.body.data.map((i: any) => i.token)).toContain(r.body.data.token);
    // An accepted invitation cannot be revoked.
    expect((await api(`/admin/invitations/${r.body.data.token}`, { method: 'DELETE', admin: true })).status).toBe(409);
  });

  it('shows pending tokens in full to super_admins only, so an admin cannot take a super_admin invitation', async () => {
    const mail = email();
    const r = await api('/admin/invitations', { admin: true, body: { email: mail, role: 'super_admin' } });
    expect(r.status).toBe(200);
    const token = r.body.data.token as string;
    const seen = (await as(adminToken, '/admin/invitations')).body.data.find((i: any) => i.email === mail);
    expect(seen).toMatchObject({ email: mail, role: 'super_admin', status: 'pending', expiresAt: r.body.data.expiresAt });
    expect(seen.token).not.toBe(token);
    expect(seen.token).toMatch(/^inv_.*\.\.\./);
    expect(JSON.stringify((await as(adminToken, '/admin/invitations')).body)).not.toContain(token);
    const take = await api(`/admin/invitations/${encodeURIComponent(seen.token)}/accept`, {
      body: { display_name: 'Usurper', password: PASSWORD },
    });
    expect(take.status).toBe(404);
    // The legacy admin token and super_admin sessions see the token.
    expect((await api('/admin/invitations', { admin: true })).body.data.find((i: any) => i.email === mail).token).toBe(token);
    expect((await as(rootToken, '/admin/invitations')).body.data.find((i: any) => i.email === mail).token).toBe(token);
  });

  it('revokes, and refuses revoked, expired and unknown invitations', async () => {
    const r = await api('/admin/invitations', { admin: true, body: { email: email(), role: 'super_admin', expires_in_days: 2 } });
    const del = await api(`/admin/invitations/${r.body.data.token}`, { method: 'DELETE', admin: true });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ data: { success: true } });
    const acc = await api(`/admin/invitations/${r.body.data.token}/accept`, { body: { display_name: 'X', password: PASSWORD } });
    expect(acc.status).toBe(410);
    expect(acc.body).toEqual({ error: 'Invitation has been revoked' });

    const e = await api('/admin/invitations', { admin: true, body: { email: email() } });
    await db`UPDATE invitations SET expires_at = now() - interval '1 minute' WHERE token = ${e.body.data.token}`;
    const exp = await api(`/admin/invitations/${e.body.data.token}/accept`, { body: { display_name: 'X', password: PASSWORD } });
    expect(exp.status).toBe(410);
    expect(exp.body).toEqual({ error: 'Invitation has expired' });
    expect((await api('/admin/invitations?status=expired', { admin: true })).body.data.map((i: any) => i.token)).toContain(
      e.body.data.token,
    );

    const unk = await api('/admin/invitations/inv_unknown/accept', { body: { display_name: 'X', password: PASSWORD } });
    expect(unk.status).toBe(404);
    expect(unk.body).toEqual({ error: 'Invitation not found' });
    expect((await api('/admin/invitations/inv_unknown', { method: 'DELETE', admin: true })).status).toBe(404);
  });

  it('validates invitation bodies', async () => {
    const cases: [unknown, number, string][] = [
      [{}, 400, 'email is required'],
      [{ email: 'nope' }, 400, 'email'],
      [{ email: email(), role: 'owner' }, 400, 'role must be one of: admin, super_admin'],
      [{ email: email(), expires_in_days: 0 }, 400, 'expires_in_days must be >= 1'],
      [{ email: email(), tenant_id: 'no-such-tenant' }, 404, 'Tenant not found'],
      [{ email: s.adminEmail }, 409, 'already exists'],
    ];
    for (const [body, status, text] of cases) {
      const r = await api('/admin/invitations', { admin: true, body });
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(r.body)).toContain(text);
    }
    const inv = await api('/admin/invitations', { admin: true, body: { email: email() } });
    const weak = await api(`/admin/invitations/${inv.body.data.token}/accept`, { body: { display_name: 'X', password: 'short' } });
    expect(weak.status).toBe(400);
    expect(weak.body.details).toEqual(['password must be at least 12 characters']);
  });
});

describe('stats', () => {
  it('reports tenants, usage and service health', async () => {
    const off = await s.createTenant();
    await api(`/admin/tenants/${off.tenantId}`, { method: 'PATCH', admin: true, body: { is_active: false } });
    const r = await as(adminToken, '/admin/stats');
    expect(r.status).toBe(200);
    const d = r.body.data;
    expect(d.tenants.total).toBe(d.tenants.active + d.tenants.inactive);
    expect(d.tenants.inactive).toBeGreaterThanOrEqual(1);
    expect(d.tenants.active).toBeGreaterThanOrEqual(1);
    // Usage metering runs in this stack: its figures are there ('unavailable' is for when it is down).
    expect(d.usage.status).toBe('ok');
    expect(d.images).toMatchObject({ total: expect.any(Number), last24h: expect.any(Number) });
    expect(d.storage).toMatchObject({ totalBytes: expect.any(Number), totalMb: expect.any(Number) });
    expect(Array.isArray(d.topTenants)).toBe(true);
    const tenancy = d.health.services.find((x: any) => x.name === 'tenancy');
    expect(tenancy.status).toBe('up');
    expect(d.health.services.map((x: any) => x.name)).toEqual(
      expect.arrayContaining(['gateway', 'tenancy', 'library', 'generation', 'usage', 'webhooks', 'oauth', 'mcp']),
    );
  });
});

describe('admin route protection', () => {
  const reads = () => [
    ['GET', '/admin/tenants'],
    ['GET', `/admin/tenants/${tenant.tenantId}`],
    ['GET', '/admin/users'],
    ['GET', `/admin/users/${rootId}`],
    ['GET', '/admin/invitations'],
    ['GET', '/admin/stats'],
    ['GET', '/admin/me'],
    ['POST', '/admin/auth/logout'],
  ];
  const writes = () => [
    ['POST', '/admin/tenants', { tenant_id: 'x', tenant_name: 'x', contact_email: 'x@example.com', provA_api_key: 'k' }],
    ['PATCH', `/admin/tenants/${tenant.tenantId}`, { notes: 'x' }],
    ['POST', `/admin/tenants/${tenant.tenantId}/api-keys`, { key_name: 'x' }],
    ['DELETE', `/admin/tenants/${tenant.tenantId}/api-keys/x`],
    ['PATCH', `/admin/users/${rootId}`, { display_name: 'x' }],
    ['POST', `/admin/users/${rootId}/unlock`],
    ['POST', '/admin/invitations', { email: 'x@example.com' }],
    ['DELETE', '/admin/invitations/inv_x'],
  ];

  it('answers 401 on every admin route without credentials', async () => {
    for (const [method, path, body] of [...reads(), ...writes()] as [string, string, unknown][]) {
      const r = await api(path, { method, body });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.body).toEqual({ error: 'Admin authentication required' });
    }
  });

  it('answers 401 with an invalid, logged-out or tenant credential', async () => {
    for (const headers of <Record<string, string>[]>[
      { authorization: 'Bearer adms_nope' },
      { 'x-admin-token': 'nope' },
      { 'x-api-key': tenant.liveKey },
    ]) {
      const r = await api('/admin/tenants', { headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
    }
  });

  it('lets an admin read but answers 403 on every super_admin write', async () => {
    for (const [method, path] of reads()) {
      if (path === '/admin/auth/logout') continue;
      const r = await as(adminToken, path, { method });
      expect(r.status, `${method} ${path}`).toBe(200);
    }
    for (const [method, path, body] of writes() as [string, string, unknown][]) {
      const r = await as(adminToken, path, { method, body });
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.body).toEqual({ error: 'super_admin privileges required' });
    }
    expect((await as(adminToken, '/admin/me')).body.data.user.userId).toBe(adminId);
  });
});
