import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { callTool, mcpClient, mintTokens, registerClient } from './mcp-support.js';

/**
 * The audit log (issue 40, item 5): every admin write of each kind makes exactly one record with its actor,
 * action, target and request id, and no secret; tenants' webhook writes and OAuth registrations and revocations
 * are recorded too; GET /admin/audit-log filters and pages; only admins read it.
 */

let s: TestStack;
let tenant: TestTenant;
let adminSession: string; // role admin
let adminUserId: string;
let superSession: string; // the bootstrap super_admin
let superUserId: string;

const PROVIDER_SECRET_A = `prov-a-SECRET-${randomUUID()}`;
const PROVIDER_SECRET_B = `prov-b-SECRET-${randomUUID()}`;

/** A request id of our own (the gateway keeps a well-formed X-Request-Id), and the answer. */
async function write(path: string, init: Parameters<TestStack['api']>[1] = {}) {
  const requestId = `audit-${randomUUID()}`;
  const r = await s.api(path, { ...init, headers: { 'x-request-id': requestId, ...(init.headers ?? {}) } });
  return { ...r, requestId };
}

type Rec = {
  id: string;
  at: string;
  actorType: string;
  actor: string;
  actorRole: string | null;
  action: string;
  tenantId: string | null;
  resourceId: string | null;
  requestId: string;
  changes: Record<string, unknown>;
};

async function list(query: Record<string, string> = {}, auth: Record<string, string> = {}) {
  const q = new URLSearchParams(query).toString();
  const r = await s.api(`/admin/audit-log${q ? `?${q}` : ''}`, Object.keys(auth).length ? { headers: auth } : { admin: true });
  return r;
}

/** The records of one request (every action). */
async function recordsOf(requestId: string, action: string): Promise<Rec[]> {
  const r = await list({ action, limit: '200' });
  expect(r.status).toBe(200);
  return (r.body.data as Rec[]).filter((x) => x.requestId === requestId);
}

/** Exactly one record of the request, with no secret anywhere in it. */
async function theRecord(requestId: string, action: string, secrets: string[] = []): Promise<Rec> {
  const found = await recordsOf(requestId, action);
  expect(found, `${action} ${requestId}`).toHaveLength(1);
  const text = JSON.stringify(found[0]);
  for (const secret of [PROVIDER_SECRET_A, PROVIDER_SECRET_B, ...secrets]) expect(text).not.toContain(secret);
  return found[0];
}

beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  tenant = await s.createTenant();
  const login = await s.api('/admin/auth/login', { body: { email: s.adminEmail, password: s.adminPassword } });
  expect(login.status).toBe(200);
  superSession = login.body.data.token;
  superUserId = login.body.data.user.userId;
  const inv = await s.api('/admin/invitations', { admin: true, body: { email: `aud${Date.now()}@example.com`, role: 'admin' } });
  const acc = await s.api(`/admin/invitations/${inv.body.data.token}/accept`, {
    body: { display_name: 'Audit Reader', password: 'a long enough password' },
  });
  expect(acc.status).toBe(200);
  adminSession = acc.body.data.token;
  adminUserId = acc.body.data.user.userId;
}, 120_000);

afterAll(async () => {
  await s?.stop();
});

describe('admin writes are recorded', () => {
  const tenantId = `aud${Date.now().toString(36)}`;

  it('createTenant: actor, action, target and request id, and no provider credential', async () => {
    const r = await write('/admin/tenants', {
      admin: true,
      body: {
        tenant_id: tenantId,
        tenant_name: 'Audited',
        contact_email: 'audited@example.com',
        provider_credentials: { provA: PROVIDER_SECRET_A, provB: [PROVIDER_SECRET_B] },
        api_keys: [{ key_name: 'primary', type: 'live' }],
      },
    });
    expect(r.status).toBe(200);
    const fullKey = r.body.data.apiKeys[0].apiKey as string;
    const rec = await theRecord(r.requestId, 'createTenant', [fullKey]);
    expect(rec).toMatchObject({ actorType: 'admin_token', actor: 'admin-token', actorRole: 'super_admin', tenantId, resourceId: tenantId });
    expect(rec.changes).toMatchObject({
      tenant_id: tenantId,
      tenant_name: 'Audited',
      provider_credentials: { provA: '[redacted]', provB: ['[redacted]'] },
      api_keys: [{ key_name: 'primary', type: 'live' }],
    });
  });

  it('updateTenant by a super_admin user: the user and role; removed pools stay visible as null', async () => {
    const r = await write(`/admin/tenants/${tenantId}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${superSession}` },
      body: { is_active: false, provA_api_key: PROVIDER_SECRET_A, provider_credentials: { provB: null } },
    });
    expect(r.status).toBe(200);
    const rec = await theRecord(r.requestId, 'updateTenant');
    expect(rec).toMatchObject({ actorType: 'admin_user', actor: superUserId, actorRole: 'super_admin', tenantId, resourceId: null });
    expect(rec.changes).toEqual({ is_active: false, provA_api_key: '[redacted]', provider_credentials: { provB: null } });
  });

  it('API keys: create, signing on, rotate, revoke (no key or signing secret in any record)', async () => {
    const c = await write(`/admin/tenants/${tenantId}/api-keys`, { admin: true, body: { key_name: 'second', type: 'test' } });
    expect(c.status).toBe(200);
    const keyId = c.body.data.keyId as string;
    const created = await theRecord(c.requestId, 'createApiKey', [c.body.data.apiKey]);
    expect(created).toMatchObject({ tenantId, resourceId: keyId, changes: { key_name: 'second', type: 'test' } });

    const on = await write(`/admin/tenants/${tenantId}/api-keys/${keyId}/signing`, { admin: true, body: { signature_required: true } });
    expect(on.status).toBe(200);
    const onRec = await theRecord(on.requestId, 'setApiKeySigning', [on.body.data.signingSecret]);
    expect(onRec).toMatchObject({ tenantId, resourceId: keyId, changes: { signature_required: true } });

    const rot = await write(`/admin/tenants/${tenantId}/api-keys/${keyId}/signing/rotate`, {
      admin: true,
      body: { grace_period_seconds: 0 },
    });
    expect(rot.status).toBe(200);
    await theRecord(rot.requestId, 'rotateApiKeySigningSecret', [rot.body.data.signingSecret, on.body.data.signingSecret]);

    const off = await write(`/admin/tenants/${tenantId}/api-keys/${keyId}/signing`, { admin: true, body: { signature_required: false } });
    expect((await theRecord(off.requestId, 'setApiKeySigning')).changes).toEqual({ signature_required: false });

    const rev = await write(`/admin/tenants/${tenantId}/api-keys/second`, { method: 'DELETE', admin: true });
    expect(rev.status).toBe(200);
    expect(await theRecord(rev.requestId, 'revokeApiKey')).toMatchObject({ tenantId, resourceId: 'second', changes: {} });
  });

  it('invitations and admin users: create, accept, update, unlock, revoke (tokens abbreviated, passwords never)', async () => {
    const inv = await write('/admin/invitations', { admin: true, body: { email: `inv${Date.now()}@example.com`, role: 'admin' } });
    expect(inv.status).toBe(200);
    const token = inv.body.data.token as string;
    const invRec = await theRecord(inv.requestId, 'createInvitation', [token]);
    expect(invRec.resourceId).toMatch(/^inv_.{4}\.\.\..{4}$/);
    expect(invRec.changes).toMatchObject({ role: 'admin' });

    const password = `pw-${randomUUID()}`;
    const acc = await write(`/admin/invitations/${token}/accept`, { body: { display_name: 'New One', password } });
    expect(acc.status).toBe(200);
    const userId = acc.body.data.user.userId as string;
    const accRec = await theRecord(acc.requestId, 'acceptInvitation', [token, password, acc.body.data.token]);
    expect(accRec).toMatchObject({ actorType: 'anonymous', resourceId: `${invRec.resourceId}/${userId}` });
    expect(accRec.changes).toEqual({ display_name: 'New One', password: '[redacted]' });

    const upd = await write(`/admin/users/${userId}`, {
      method: 'PATCH',
      admin: true,
      body: { display_name: 'Renamed', is_active: false },
    });
    expect(upd.status).toBe(200);
    expect(await theRecord(upd.requestId, 'updateAdminUser')).toMatchObject({
      resourceId: userId,
      tenantId: null,
      changes: { display_name: 'Renamed', is_active: false },
    });

    const unl = await write(`/admin/users/${userId}/unlock`, { method: 'POST', admin: true });
    expect(unl.status).toBe(200);
    expect((await theRecord(unl.requestId, 'unlockAdminUser')).resourceId).toBe(userId);

    const inv2 = await s.api('/admin/invitations', { admin: true, body: { email: `rev${Date.now()}@example.com` } });
    const rev = await write(`/admin/invitations/${inv2.body.data.token}`, { method: 'DELETE', admin: true });
    expect(rev.status).toBe(200);
    const revRec = await theRecord(rev.requestId, 'revokeInvitation', [inv2.body.data.token]);
    expect(revRec.resourceId).toMatch(/^inv_.{4}\.\.\..{4}$/);
  });

  it('a refused or failed write records nothing; reads record nothing', async () => {
    const dup = await write('/admin/tenants', {
      admin: true,
      body: { tenant_id: tenantId, tenant_name: 'Again', contact_email: 'a@example.com', provider_credentials: { provA: 'k' } },
    });
    expect(dup.status).toBe(409);
    expect(await recordsOf(dup.requestId, 'createTenant')).toEqual([]);
    const bad = await write(`/admin/tenants/${tenantId}`, { method: 'PATCH', admin: true, body: { monthly_quota_mb: 'lots' } });
    expect(bad.status).toBe(400);
    expect(await recordsOf(bad.requestId, 'updateTenant')).toEqual([]);
    const forbidden = await write(`/admin/tenants/${tenantId}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminSession}` },
      body: { is_active: true },
    });
    expect(forbidden.status).toBe(403);
    expect(await recordsOf(forbidden.requestId, 'updateTenant')).toEqual([]);
    const read = await write(`/admin/tenants/${tenantId}`, { admin: true });
    expect(read.status).toBe(200);
    const all = (await list({ limit: '200' })).body.data as Rec[];
    expect(all.filter((x) => x.requestId === read.requestId)).toEqual([]);
  });
});

describe("tenants' security writes are recorded", () => {
  it('webhook endpoints: create, update, delete, with the tenant as actor and no signing secret', async () => {
    const c = await write('/api/webhooks', {
      key: tenant.liveKey,
      body: { url: 'https://127.0.0.1:9/hook?token=abc123secret', events: ['image.stored'], description: 'audited' },
    });
    expect(c.status).toBe(201);
    const id = String(c.body.data.id);
    const rec = await theRecord(c.requestId, 'createWebhook', [c.body.data.secret, 'abc123secret']);
    expect(rec).toMatchObject({ actorType: 'tenant', actor: tenant.tenantId, actorRole: null, tenantId: tenant.tenantId, resourceId: id });
    expect(rec.changes).toMatchObject({ url: 'https://127.0.0.1:9/hook [query redacted]', events: ['image.stored'] });

    const u = await write(`/api/webhooks/${id}`, { method: 'PATCH', key: tenant.liveKey, body: { enabled: false } });
    expect(u.status).toBe(200);
    expect(await theRecord(u.requestId, 'updateWebhook')).toMatchObject({ resourceId: id, changes: { enabled: false } });

    const d = await write(`/api/webhooks/${id}`, { method: 'DELETE', key: tenant.liveKey });
    expect(d.status).toBe(200);
    expect(await theRecord(d.requestId, 'deleteWebhook')).toMatchObject({ resourceId: id, tenantId: tenant.tenantId });

    // Another tenant's webhook is 404: nothing recorded.
    const other = await s.createTenant();
    const miss = await write(`/api/webhooks/${id}`, { method: 'DELETE', key: other.liveKey });
    expect(miss.status).toBe(404);
    expect(await recordsOf(miss.requestId, 'deleteWebhook')).toEqual([]);
  });

  it('webhook writes through the MCP tools are recorded as over REST', async () => {
    const mcpTenant = await s.createTenant();
    const client = await mcpClient(s.baseUrl, mcpTenant.liveKey);
    try {
      const created = await callTool(client, 'create_webhook', { url: 'https://127.0.0.1:9/mcp-hook', events: ['image.deleted'] });
      expect(created.ok, created.text).toBe(true);
      const id = String(created.json.data.id);
      expect((await callTool(client, 'update_webhook', { id: Number(id), enabled: false })).ok).toBe(true);
      expect((await callTool(client, 'delete_webhook', { id: Number(id) })).ok).toBe(true);
      const recs = ((await list({ tenant: mcpTenant.tenantId, limit: '200' })).body.data as Rec[])
        .filter((r) => r.action.endsWith('Webhook'))
        .reverse();
      expect(recs.map((r) => [r.action, r.resourceId, r.actor])).toEqual([
        ['createWebhook', id, mcpTenant.tenantId],
        ['updateWebhook', id, mcpTenant.tenantId],
        ['deleteWebhook', id, mcpTenant.tenantId],
      ]);
      expect(recs[0].changes).toMatchObject({ url: 'https://127.0.0.1:9/mcp-hook', events: ['image.deleted'] });
      expect(JSON.stringify(recs)).not.toContain(created.json.data.secret);
    } finally {
      await client.close();
    }
  });

  it('OAuth: a client registration and a token revocation', async () => {
    const reg = await registerClient(s.baseUrl, 'http://127.0.0.1:9/callback', { client_name: 'audited client' });
    const regRecs = ((await list({ action: 'registerOAuthClient', limit: '200' })).body.data as Rec[]).filter(
      (x) => x.resourceId === reg.client_id,
    );
    expect(regRecs).toHaveLength(1);
    expect(regRecs[0]).toMatchObject({ actorType: 'anonymous', actor: `oauth-client:${reg.client_id}`, tenantId: null });
    expect(regRecs[0].changes).toMatchObject({ client_name: 'audited client', redirect_uris: ['http://127.0.0.1:9/callback'] });
    expect(JSON.stringify(regRecs[0])).not.toContain('client_secret');

    const tokens = await mintTokens(s.baseUrl, tenant.liveKey, 'analytics:read');
    // mintTokens registered its own client: the newest registration.
    const minted = ((await list({ action: 'registerOAuthClient', limit: '1' })).body.data as Rec[])[0];
    const requestId = `audit-${randomUUID()}`;
    const res = await fetch(`${s.baseUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-request-id': requestId },
      body: new URLSearchParams({ token: tokens.refresh_token, client_id: minted.resourceId as string }),
    });
    expect(res.status).toBe(200);
    const rec = await theRecord(requestId, 'revokeOAuthToken', [tokens.refresh_token, tokens.access_token]);
    expect(rec).toMatchObject({ actorType: 'tenant', actor: tenant.tenantId, tenantId: tenant.tenantId, resourceId: minted.resourceId });
    expect(rec.changes).toMatchObject({ grant_revoked: true, token_type: 'RefreshToken' });
  });
});

describe('GET /admin/audit-log', () => {
  it('filters by actor, tenant, action and time range', async () => {
    const byActor = await list({ actor: superUserId, limit: '200' });
    expect(byActor.status).toBe(200);
    expect(byActor.body.data.length).toBeGreaterThan(0);
    expect((byActor.body.data as Rec[]).every((x) => x.actor === superUserId)).toBe(true);

    const byTenant = (await list({ tenant: tenant.tenantId, limit: '200' })).body.data as Rec[];
    expect(byTenant.map((x) => x.action)).toEqual(expect.arrayContaining(['createTenant', 'createWebhook', 'deleteWebhook']));
    expect(byTenant.every((x) => x.tenantId === tenant.tenantId)).toBe(true);

    const both = (await list({ tenant: tenant.tenantId, action: 'createWebhook' })).body.data as Rec[];
    expect(both).toHaveLength(1);

    const all = (await list({ limit: '200' })).body.data as Rec[];
    const mid = all[Math.floor(all.length / 2)];
    const newer = (await list({ from: mid.at, limit: '200' })).body.data as Rec[];
    const older = (await list({ to: mid.at, limit: '200' })).body.data as Rec[];
    expect(newer.every((x) => x.at >= mid.at)).toBe(true);
    expect(older.every((x) => x.at < mid.at)).toBe(true);
    expect(newer.length + older.length).toBe(all.length);
    const none = await list({ from: new Date(Date.now() + 3_600_000).toISOString() });
    expect(none.body).toEqual({ data: [], pagination: { limit: 50, hasMore: false, nextCursor: null } });
  });

  it('pages newest first with a cursor, each record once', async () => {
    const all = (await list({ limit: '200' })).body.data as Rec[];
    expect(all.length).toBeGreaterThan(5);
    const seen: Rec[] = [];
    let cursor: string | null = null;
    do {
      const r = await list({ limit: '4', ...(cursor ? { cursor } : {}) });
      expect(r.status).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(4);
      seen.push(...r.body.data);
      cursor = r.body.pagination.nextCursor;
      expect(r.body.pagination.hasMore).toBe(cursor !== null);
    } while (cursor);
    expect(seen.map((x) => x.id)).toEqual(all.map((x) => x.id));
    const times = seen.map((x) => x.at);
    expect([...times].sort().reverse()).toEqual(times);
  });

  it('refuses bad filters with 400', async () => {
    expect((await list({ cursor: 'not-a-cursor' })).status).toBe(400);
    expect((await list({ from: 'yesterday' })).status).toBe(400);
    expect((await list({ limit: '0' })).status).toBe(400);
    expect((await list({ limit: '201' })).status).toBe(400);
  });

  it('is for admins: a tenant key gets 401, an admin-role user reads it', async () => {
    const asTenant = await s.api('/admin/audit-log', { key: tenant.liveKey });
    expect(asTenant.status).toBe(401);
    expect((await s.api('/admin/audit-log')).status).toBe(401);
    const asAdmin = await list({ limit: '5' }, { authorization: `Bearer ${adminSession}` });
    expect(asAdmin.status).toBe(200);
    expect(asAdmin.body.data.length).toBe(5);
    // Reading is not a write: the admin's read left no record of it.
    expect(((await list({ actor: adminUserId })).body.data as Rec[]).filter((x) => x.action === 'listAuditLog')).toEqual([]);
  });

  it('no route changes or deletes a record', () => {
    // The catalogue has no other audit-log operation (PATCH/DELETE would be 404 'Route not found').
    return s.api('/admin/audit-log', { method: 'DELETE', admin: true }).then((r) => expect(r.status).toBe(404));
  });
});
