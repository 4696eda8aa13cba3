import { OPERATIONS, type OperationSpec } from '@imagegen/api-schemas';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_TOOLS } from '../../services/mcp/src/tools/index.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';

/**
 * The auth the gateway enforces is the auth the document states, for every operation of the catalogue
 * (libs/api-schemas operations.ts, the one place both come from): without a credential, with the wrong kind of
 * credential, and with an admin user below the role an operation needs. Every answer is also checked against the
 * document by the api helper. MCP tools require the scopes of the operation they perform.
 */

let s: TestStack;
let tenant: TestTenant;
let adminSession: string; // an admin user with role 'admin'
let doc: { paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>> };

const randomIp = () => `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 254) + 1}`;
const PARAMS: Record<string, string> = {
  id: '987654',
  identifier: '987654',
  tenantId: 'no-such-tenant',
  keyRef: '987654',
  userId: '00000000-0000-4000-8000-000000000000',
  token: 'inv_nosuchinvitation',
  sessionId: 'no-such-session',
  executionId: '00000000-0000-4000-8000-000000000000',
};

const operations = Object.entries(OPERATIONS).map(([key, spec]) => {
  const [method, url] = key.split(' ');
  return { key, method, url, spec, path: url.replace(/:(\w+)/g, (_, p: string) => PARAMS[p] ?? 'x') };
});

/** One request, from its own client address (the admin API is rate-limited per address). */
const call = (op: (typeof operations)[number], headers: Record<string, string> = {}) =>
  s.api(op.path, {
    method: op.method,
    headers: { 'cf-connecting-ip': randomIp(), ...headers },
    body: ['POST', 'PATCH', 'PUT'].includes(op.method) ? {} : undefined,
  });

const SECURITY: Record<OperationSpec['auth'], string[]> = {
  none: [],
  tenant: ['apiKey', 'bearer'],
  admin: ['bearer', 'adminToken'],
  super_admin: ['bearer', 'adminToken'],
};

beforeAll(async () => {
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  tenant = await s.createTenant();
  const mail = `ops${Date.now().toString(36)}@example.com`;
  const inv = await s.api('/admin/invitations', { admin: true, body: { email: mail, role: 'admin' } });
  expect(inv.status).toBe(200);
  const acc = await s.api(`/admin/invitations/${inv.body.data.token}/accept`, {
    body: { display_name: 'Ops Admin', password: 'a long enough password' },
  });
  expect(acc.status).toBe(200);
  adminSession = acc.body.data.token;
  doc = (await s.api('/docs/json')).body;
}, 120_000);

afterAll(async () => {
  await s?.stop();
});

describe('every operation of the catalogue', () => {
  it('is in the document with the security its auth states', () => {
    for (const op of operations) {
      const documented = doc.paths[op.url.replace(/:(\w+)/g, '{$1}')]?.[op.method.toLowerCase()];
      expect(documented, op.key).toBeDefined();
      const schemes = (documented?.security ?? []).flatMap((r) => Object.keys(r));
      expect(schemes, op.key).toEqual(SECURITY[op.spec.auth]);
    }
  });

  it('refuses a request without credentials with 401 exactly when the document asks for one', async () => {
    for (const op of operations) {
      const r = await call(op);
      if (op.spec.auth === 'none') expect([401, 403], `${op.key} ${r.status}`).not.toContain(r.status);
      else expect(r.status, op.key).toBe(401);
    }
  });

  it('refuses the wrong kind of credential: an admin token on tenant operations, a tenant key on admin ones', async () => {
    for (const op of operations.filter((o) => o.spec.auth === 'tenant')) {
      expect((await call(op, { 'x-admin-token': s.adminToken })).status, op.key).toBe(401);
      expect((await call(op, { authorization: `Bearer ${adminSession}` })).status, op.key).toBe(401);
    }
    for (const op of operations.filter((o) => o.spec.auth === 'admin' || o.spec.auth === 'super_admin')) {
      expect((await call(op, { 'x-api-key': tenant.liveKey })).status, op.key).toBe(401);
      expect((await call(op, { authorization: `Bearer ${tenant.liveKey}` })).status, op.key).toBe(401);
    }
  });

  it('answers 403 to an admin user on super_admin operations and lets them read the admin ones', async () => {
    const bearer = { authorization: `Bearer ${adminSession}` };
    for (const op of operations.filter((o) => o.spec.auth === 'super_admin')) {
      const r = await call(op, bearer);
      expect(r.status, op.key).toBe(403);
      expect(r.body.error).toBe('super_admin privileges required');
    }
    for (const op of operations.filter((o) => o.spec.auth === 'admin' && o.method === 'GET')) {
      expect([401, 403], `${op.key}`).not.toContain((await call(op, bearer)).status);
    }
  });

  it('lets a tenant key through on tenant operations', async () => {
    for (const op of operations.filter((o) => o.spec.auth === 'tenant' && o.method === 'GET' && !o.spec.ok.media)) {
      expect([401, 403], op.key).not.toContain((await call(op, { 'x-api-key': tenant.liveKey })).status);
    }
  });
});

describe('MCP tools', () => {
  it('require the scopes, idempotency and rate class of the operation they perform', () => {
    const own = ALL_TOOLS.filter((t) => !(t as { operation?: string }).operation).map((t) => t.name);
    // Only the tools with no REST twin declare scopes of their own.
    expect(own.sort()).toEqual(['list_models', 'wait_for_execution']);
    for (const t of ALL_TOOLS) {
      const key = (t as { operation?: string }).operation;
      if (!key) continue;
      const spec = OPERATIONS[key];
      expect(spec?.auth, t.name).toBe('tenant');
      expect(t.scopes, t.name).toEqual(spec.scopes);
      expect(t.idempotent === true, t.name).toBe(spec.idempotent === true);
      expect(t.rate, t.name).toBe(spec.rate);
    }
  });
});
