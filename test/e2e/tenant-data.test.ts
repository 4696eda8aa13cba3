import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createDb, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepExpiredExports } from '../../services/tenancy/src/grpc.js';
import { startTestStack, type TestStack, type TestTenant } from '../support/stack.js';
import { librarySeeder } from './images-seed.js';
import { type ImageServer, startImageServer } from './products-support.js';

/**
 * A tenant's data (issue 40, item 4): the export (a job, then a ZIP of every object byte for byte and a JSON
 * document of every resource without secrets) and the purge (super_admin, deactivated tenant, confirmation;
 * every tenant row in every schema, every object, resumable after a real fault), with auth and isolation.
 */

const SCHEMAS = ['tenancy', 'library', 'generation', 'usage', 'webhooks', 'oauth'];
/** Tables with a tenant column that the purge keeps on purpose: the audit records. */
const KEPT = new Set(['tenancy.audit_log']);
/** The signing secrets of the seeded webhook endpoints (answered once at creation). */
const webhookSecrets: string[] = [];

let s: TestStack;
let sql: Sql;
let img: ImageServer;
let superSession: string;
let adminSession: string;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function tenantTables(): Promise<string[]> {
  const rows = await sql<{ t: string }[]>`
    SELECT c.table_schema || '.' || c.table_name AS t FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema = ANY(${SCHEMAS}) AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE' ORDER BY 1`;
  return rows.map((r) => r.t);
}

/** Every row of the tenant in every table with a tenant column, as text, per table (the row-for-row fingerprint). */
/**
 * Every row of the tenant, per table, as JSON. `steady` leaves out the API keys' use counters, which tenancy writes
 * in batches after the requests that used the keys (the other tenant's own earlier requests, not the purge).
 */
async function rowsOf(tenantId: string, steady = false): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  const row = steady ? "to_jsonb(x) - 'usage_count' - 'last_used_at'" : 'to_jsonb(x)';
  for (const t of await tenantTables()) {
    const rows = await sql.unsafe<{ r: string }[]>(`SELECT (${row})::text AS r FROM ${t} x WHERE tenant_id = $1 ORDER BY 1`, [tenantId]);
    out[t] = rows.map((r) => r.r);
  }
  return out;
}

/** Every object file under the tenant's prefix: key -> sha256. */
function objectsOf(tenantId: string): Record<string, string> {
  const root = join(s.env.DATA_DIR as string, 'objects');
  const dir = join(root, 'tenants', tenantId);
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(root, p)] = sha(readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

/** A tenant with data in every table of every schema that has a tenant column. */
async function seedEverything(t: TestTenant): Promise<void> {
  const key = t.liveKey;
  const gen = await s.api('/api/images', { key, body: { prompt: 'a lighthouse at dusk' }, headers: { 'x-session-id': 'export-session' } });
  expect(gen.status).toBe(200);
  const seed = librarySeeder(s);
  try {
    for (let i = 0; i < 3; i++) await seed.store(t.tenantId, { color: `#${i}${i}a` });
  } finally {
    seed.close();
  }
  expect(
    (await s.api('/api/characters', { key, body: { character_name: 'Ada', base_prompt: 'a calm engineer in a grey coat' } })).status,
  ).toBeLessThan(300);
  expect((await s.api('/api/scenes', { key, body: { scene_name: 'Harbour', scene_prompt: 'a harbour at night' } })).status).toBeLessThan(
    300,
  );
  expect((await s.api('/api/style-presets', { key, body: { name: 'Noir', prompt: 'black and white' } })).status).toBeLessThan(300);
  expect(
    (await s.api('/api/search-presets', { key, body: { presetName: 'mine', filters: { search: 'lighthouse' } } })).status,
  ).toBeLessThan(300);
  expect((await s.api('/api/products', { key, body: { product_name: 'Red mug', product_url: `${img.url}/red.png` } })).status).toBeLessThan(
    300,
  );
  const hook = await s.api('/api/webhooks', { key, body: { url: 'https://127.0.0.1:9/hook', events: ['quota.warning'] } });
  expect(hook.status).toBeLessThan(300);
  expect(hook.body.data.secret).toEqual(expect.any(String));
  webhookSecrets.push(hook.body.data.secret);
  expect((await s.api(`/api/webhooks/${hook.body.data.id}/test`, { key, method: 'POST' })).status).toBe(202);
  // A web console session (tenancy console_sessions), signed in with the key as a browser would.
  const consoleSession = await fetch(`${s.baseUrl}/console/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiKey: key }),
  });
  expect(consoleSession.status, await consoleSession.clone().text()).toBeLessThan(300);
  const exp = await s.api('/api/exports', { key, method: 'POST' });
  expect(exp.status).toBe(202);
  await waitExport(`/api/exports/${exp.body.data.exportId}`, { key });
  // An admin restricted to this tenant (its user row) and a pending invitation for it.
  const invite = (email: string) => s.api('/admin/invitations', { admin: true, body: { email, role: 'admin', tenant_id: t.tenantId } });
  const inv = await invite(`${t.tenantId}-a@example.com`);
  expect(inv.status).toBeLessThan(300);
  const acc = await s.api(`/admin/invitations/${inv.body.data.token}/accept`, {
    body: { display_name: 'Tenant Admin', password: 'a long enough password' },
  });
  expect(acc.status).toBe(200);
  expect((await invite(`${t.tenantId}-b@example.com`)).status).toBeLessThan(300);
  // Rows no request of a test makes quickly: a quota alert and an image still pending its execution's outcome.
  await sql`INSERT INTO usage.quota_alerts (tenant_id, billing_period, threshold, usage_bytes, quota_mb, event_id)
    VALUES (${t.tenantId}, '2026-01', 80, 1, 1, gen_random_uuid())`;
  await sql`INSERT INTO library.pending_images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height,
      size_bytes, thumbnail_size_bytes, operation)
    SELECT tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes, thumbnail_size_bytes, operation
    FROM library.images WHERE tenant_id = ${t.tenantId} ORDER BY id LIMIT 1`;
  // The test delivery's attempt is made by the dispatcher: wait for it.
  for (let i = 0; i < 100; i++) {
    const [a] = await sql`SELECT count(*)::int AS n FROM webhooks.delivery_attempts a JOIN webhooks.deliveries d ON d.id = a.delivery_id
      WHERE d.tenant_id = ${t.tenantId}`;
    if ((a as { n: number }).n > 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitExport(path: string, auth: { key?: string; headers?: Record<string, string> }) {
  for (let i = 0; i < 300; i++) {
    const r = await s.api(path, auth);
    expect(r.status).toBe(200);
    if (r.body.data.status === 'completed') return r.body.data;
    expect(r.body.data.status).not.toBe('failed');
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error('export did not complete');
}

const superAuth = () => ({ headers: { authorization: `Bearer ${superSession}` } });

async function deactivate(tenantId: string) {
  const r = await s.api(`/admin/tenants/${tenantId}`, { admin: true, method: 'PATCH', body: { is_active: false } });
  expect(r.status).toBe(200);
}

beforeAll(async () => {
  img = await startImageServer();
  s = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1', WEBHOOK_RETRY_BASE_MS: '60000', GRPC_DEADLINE_MS: '4000' } });
  sql = createDb(s.env.DATABASE_URL as string, { schema: 'public', max: 2 });
  const login = await s.api('/admin/auth/login', { body: { email: s.adminEmail, password: s.adminPassword } });
  superSession = login.body.data.token;
  const inv = await s.api('/admin/invitations', { admin: true, body: { email: `td${Date.now()}@example.com`, role: 'admin' } });
  const acc = await s.api(`/admin/invitations/${inv.body.data.token}/accept`, {
    body: { display_name: 'Plain Admin', password: 'a long enough password' },
  });
  adminSession = acc.body.data.token;
}, 120_000);

afterAll(async () => {
  await sql?.end();
  await s?.stop();
  await img?.close();
});

describe('export', () => {
  let t: TestTenant;
  let other: TestTenant;
  beforeAll(async () => {
    t = await s.createTenant();
    other = await s.createTenant();
    await seedEverything(t);
  }, 120_000);

  it('streams a ZIP of every object byte for byte and a JSON document of every resource, without secrets', async () => {
    const start = await s.api('/api/exports', { key: t.liveKey, method: 'POST' });
    expect(start.status).toBe(202);
    expect(start.headers.get('location')).toBe(`/api/exports/${start.body.data.exportId}`);
    expect(['queued', 'running']).toContain(start.body.data.status);
    const done = await waitExport(`/api/exports/${start.body.data.exportId}`, { key: t.liveKey });
    expect(done.downloadUrl).toBe(`/api/exports/${done.exportId}/download`);
    expect(done.phase).toBe('done');
    expect(done.itemsDone).toBe(done.itemsTotal);

    const res = await fetch(`${s.baseUrl}${done.downloadUrl}`, { headers: { 'x-api-key': t.liveKey } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    const zip = Buffer.from(await res.arrayBuffer());
    expect(zip.length).toBe(done.sizeBytes);
    const dir = mkdtempSync(join(tmpdir(), 'export-'));
    try {
      writeFileSync(join(dir, 'x.zip'), zip);
      execFileSync('unzip', ['-q', join(dir, 'x.zip'), '-d', join(dir, 'out')]);
      const doc = JSON.parse(readFileSync(join(dir, 'out', 'tenant.json'), 'utf8'));
      expect(doc.tenant_id).toBe(t.tenantId);
      const r = doc.resources as Record<string, Record<string, unknown>[]>;
      // Every resource of the tenant, each exactly as many as its table holds.
      const counts: Record<string, string> = {
        'tenancy.tenants': 'tenancy.tenants',
        'tenancy.api_keys': 'tenancy.api_keys',
        'tenancy.provider_credentials': 'tenancy.provider_credentials',
        'tenancy.tenant_exports': 'tenancy.tenant_exports',
        'library.images': 'library.images',
        'library.sessions': 'library.sessions',
        'library.characters': 'library.characters',
        'library.products': 'library.products',
        'library.scenes': 'library.scenes',
        'library.style_presets': 'library.style_presets',
        'library.search_presets': 'library.search_presets',
        'generation.executions': 'generation.executions',
        'usage.usage_months': 'usage.usage_months',
        'usage.usage_hours': 'usage.usage_hours',
        'usage.quota_alerts': 'usage.quota_alerts',
        'webhooks.endpoints': 'webhooks.endpoints',
      };
      for (const [name, table] of Object.entries(counts)) {
        const [{ n }] = (await sql.unsafe(`SELECT count(*)::int AS n FROM ${table} WHERE tenant_id = $1`, [t.tenantId])) as unknown as [
          { n: number },
        ];
        expect(r[name], name).toHaveLength(name === 'tenancy.tenant_exports' ? n : n);
        expect(n, name).toBeGreaterThan(0);
      }
      const logs = r['generation.executions']?.[0]?.logs as unknown[] | undefined;
      expect(logs?.length).toBeGreaterThan(0);
      // No secret: no key hash, signing secret, encrypted provider key or webhook secret, by name or by value.
      const text = readFileSync(join(dir, 'out', 'tenant.json'), 'utf8');
      for (const name of ['"key_hash"', '"signing_secret"', '"previous_signing_secret"', '"encrypted"', '"secret"', '"job_request"'])
        expect(text).not.toContain(name);
      for (const value of [...webhookSecrets, t.liveKey, t.testKey, 'sandbox-key-a1', 'sandbox-key-b1']) expect(text).not.toContain(value);
      // Every object of every image and product, byte for byte.
      const stored = objectsOf(t.tenantId);
      const keys: string[] = [];
      for (const i of r['library.images'] ?? []) keys.push(i.object_key as string, i.thumbnail_key as string);
      for (const p of r['library.products'] ?? []) keys.push(p.object_key as string, p.object_thumbnail_key as string);
      expect(keys.length).toBeGreaterThan(8);
      for (const key of keys) {
        const inZip = join(dir, 'out', 'objects', key.slice(`tenants/${t.tenantId}/`.length));
        expect(existsSync(inZip), key).toBe(true);
        expect(sha(readFileSync(inZip)), key).toBe(stored[key]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // Recorded in the audit log with the export's id.
    const audit = await s.api(`/admin/audit-log?action=createExport&tenant=${t.tenantId}`, { admin: true });
    expect(audit.body.data.map((a: { resourceId: string }) => a.resourceId)).toContain(start.body.data.exportId);
  });

  it('a super_admin exports any tenant; an admin (not super) and another tenant cannot', async () => {
    const start = await s.api(`/admin/tenants/${t.tenantId}/exports`, { ...superAuth(), method: 'POST' });
    expect(start.status).toBe(202);
    const done = await waitExport(`/admin/tenants/${t.tenantId}/exports/${start.body.data.exportId}`, superAuth());
    const res = await fetch(`${s.baseUrl}${done.downloadUrl}`, superAuth());
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(done.sizeBytes);

    const asAdmin = await s.api(`/admin/tenants/${t.tenantId}/exports`, {
      headers: { authorization: `Bearer ${adminSession}` },
      method: 'POST',
    });
    expect(asAdmin.status).toBe(403);
    expect((await s.api('/api/exports', { method: 'POST' })).status).toBe(401);
    expect((await s.api(`/admin/tenants/${t.tenantId}/exports`, { key: t.liveKey, method: 'POST' })).status).toBe(401);
    // Another tenant's export id is unknown to this tenant, and its ZIP too.
    const theirs = await s.api(`/api/exports/${start.body.data.exportId}`, { key: other.liveKey });
    expect(theirs.status).toBe(404);
    expect(theirs.body).toEqual({ error: 'Export not found' });
    expect((await s.api(`/api/exports/${start.body.data.exportId}/download`, { key: other.liveKey })).status).toBe(404);
    expect((await s.api(`/admin/tenants/${other.tenantId}/exports/${start.body.data.exportId}`, superAuth())).status).toBe(404);
    expect((await s.api('/admin/tenants/nosuchtenant/exports', { ...superAuth(), method: 'POST' })).status).toBe(404);
  });
  it('a ZIP past EXPORT_RETENTION_DAYS reads expired, answers 410, and the hourly sweep removes it', async () => {
    const start = await s.api('/api/exports', { key: t.liveKey, method: 'POST' });
    const done = await waitExport(`/api/exports/${start.body.data.exportId}`, { key: t.liveKey });
    const key = `tenants/${t.tenantId}/exports/${done.exportId}.zip`;
    expect(Object.keys(objectsOf(t.tenantId))).toContain(key);
    const days = (Date.parse(done.expiresAt) - Date.parse(done.completedAt)) / 86_400_000;
    expect(Math.round(days)).toBe(7);
    await sql`UPDATE tenancy.tenant_exports SET expires_at = now() - interval '1 minute' WHERE export_id = ${done.exportId}`;
    const read = await s.api(`/api/exports/${done.exportId}`, { key: t.liveKey });
    expect(read.body.data).toMatchObject({ status: 'expired', downloadUrl: null });
    const gone = await s.api(`/api/exports/${done.exportId}/download`, { key: t.liveKey });
    expect(gone.status).toBe(410);
    expect(gone.body).toEqual({ error: 'Export has expired' });
    // The sweep (tenancy, hourly) marks it and removes what is left.
    const other = await s.api('/api/exports', { key: t.liveKey, method: 'POST' });
    const second = await waitExport(`/api/exports/${other.body.data.exportId}`, { key: t.liveKey });
    await sql`UPDATE tenancy.tenant_exports SET expires_at = now() - interval '1 minute' WHERE export_id = ${second.exportId}`;
    const tenancySql = createDb(s.env.DATABASE_URL as string, { schema: 'tenancy', max: 1 });
    try {
      expect(await sweepExpiredExports(tenancySql, s.stack.ctx.storage, s.stack.ctx.logger)).toBeGreaterThanOrEqual(1);
    } finally {
      await tenancySql.end();
    }
    expect(Object.keys(objectsOf(t.tenantId))).not.toContain(`tenants/${t.tenantId}/exports/${second.exportId}.zip`);
    const [row] = await sql`SELECT status FROM tenancy.tenant_exports WHERE export_id = ${second.exportId}`;
    expect(row?.status).toBe('expired');
  });

  it('a download before completion is 409', async () => {
    const [row] = await sql`INSERT INTO tenancy.tenant_exports (export_id, tenant_id, object_key, requested_by, status)
      VALUES (${`exp_running${Date.now()}`}, ${t.tenantId}, 'tenants/x/exports/none.zip', 'test', 'running') RETURNING export_id`;
    const r = await s.api(`/api/exports/${row?.export_id}/download`, { key: t.liveKey });
    expect(r.status).toBe(409);
    expect(r.body).toEqual({ error: 'Export is not completed' });
    // Its heartbeat stopped long ago (its process died): it reads failed, never running forever.
    await sql`UPDATE tenancy.tenant_exports SET updated_at = now() - interval '10 minutes' WHERE export_id = ${row?.export_id}`;
    const read = await s.api(`/api/exports/${row?.export_id}`, { key: t.liveKey });
    expect(read.body.data.status).toBe('failed');
    expect(read.body.data.error).toMatch(/interrupted/);
  });
});

/** Rows that go with their parent's by an ON DELETE CASCADE foreign key (the services' `cascaded` tables). */
const CASCADED = ['generation.execution_logs', 'webhooks.deliveries'];

it('every tenant table but the cascaded ones has an index that starts with tenant_id (the purge and export read by it)', async () => {
  const indexed = await sql<{ t: string }[]>`
    SELECT DISTINCT n.nspname || '.' || c.relname AS t
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
    WHERE n.nspname = ANY(${SCHEMAS}) AND a.attname = 'tenant_id'`;
  const have = new Set(indexed.map((r) => r.t));
  const missing = (await tenantTables()).filter((t) => !have.has(t) && !CASCADED.includes(t));
  expect(missing).toEqual([]);
  // The cascaded tables really hang off a parent that the purge empties first.
  const fks = await sql<{ t: string }[]>`
    SELECT DISTINCT n.nspname || '.' || c.relname AS t FROM pg_constraint k
    JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE k.contype = 'f' AND k.confdeltype = 'c'`;
  for (const t of CASCADED) expect(fks.map((r) => r.t)).toContain(t);
});

describe('purge', () => {
  let t: TestTenant;
  let keep: TestTenant;
  beforeAll(async () => {
    t = await s.createTenant();
    keep = await s.createTenant();
    await seedEverything(t);
    await seedEverything(keep);
  }, 180_000);

  it('refuses without the confirmation, for an active tenant, for an admin or a tenant key', async () => {
    const url = `/admin/tenants/${t.tenantId}/purge`;
    const missing = await s.api(url, { ...superAuth(), body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: 'Invalid request payload', details: ['confirm is required'] });
    const wrong = await s.api(url, { ...superAuth(), body: { confirm: keep.tenantId } });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ error: 'Invalid request payload', details: ["confirm must repeat the tenant's id"] });
    const active = await s.api(url, { ...superAuth(), body: { confirm: t.tenantId } });
    expect(active.status).toBe(409);
    expect(active.body).toEqual({ error: 'Tenant must be deactivated before it is purged' });
    expect((await s.api(url, { headers: { authorization: `Bearer ${adminSession}` }, body: { confirm: t.tenantId } })).status).toBe(403);
    expect((await s.api(url, { key: t.liveKey, body: { confirm: t.tenantId } })).status).toBe(401);
    expect((await s.api(url, { body: { confirm: t.tenantId } })).status).toBe(401);
    const unknown = await s.api('/admin/tenants/nosuchtenant/purge', { ...superAuth(), body: { confirm: 'nosuchtenant' } });
    expect(unknown.status).toBe(404);
  });

  it('removes every row of the tenant in every schema and every object, resumes after a real fault, leaves another tenant untouched', async () => {
    // Data in every table with a tenant column (a new table without data here fails this test until it is seeded).
    const before = await rowsOf(t.tenantId);
    const empty = Object.entries(before)
      .filter(([table, rows]) => rows.length === 0 && !KEPT.has(table))
      .map(([table]) => table);
    expect(empty, 'tables with a tenant column but no rows of the purged tenant').toEqual([]);
    const objectsBefore = objectsOf(t.tenantId);
    expect(Object.keys(objectsBefore).length).toBeGreaterThan(8);
    // The other tenant at rest: its keys' use counts are written in batches after its seeding's requests.
    let keepRows = await rowsOf(keep.tenantId, true);
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      const again = await rowsOf(keep.tenantId, true);
      if (JSON.stringify(again) === JSON.stringify(keepRows)) break;
      keepRows = again;
    }
    const keepObjects = objectsOf(keep.tenantId);

    await deactivate(t.tenantId);
    // A real fault halfway: usage's table is locked by another transaction, so the usage step outlives its
    // deadline (GRPC_DEADLINE_MS=4000) and the purge fails after the webhooks and generation steps.
    const locker = createDb(s.env.DATABASE_URL as string, { schema: 'public', max: 1 });
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => {
      locked = r;
    });
    const tx = locker.begin(async (x) => {
      await x`LOCK TABLE usage.usage_months IN ACCESS EXCLUSIVE MODE`;
      locked();
      await held;
    });
    await isLocked;
    const cut = await s.api(`/admin/tenants/${t.tenantId}/purge`, { ...superAuth(), body: { confirm: t.tenantId } });
    release();
    await tx;
    await locker.end();
    expect(cut.status).toBeGreaterThanOrEqual(500);
    const half = await rowsOf(t.tenantId);
    expect(half['webhooks.endpoints']).toEqual([]);
    expect(half['generation.executions']).toEqual([]);
    expect(half['library.images']?.length).toBeGreaterThan(0);
    expect(half['tenancy.tenants']).toHaveLength(1);
    // Half-purged: it cannot be brought back.
    const back = await s.api(`/admin/tenants/${t.tenantId}`, { admin: true, method: 'PATCH', body: { is_active: true } });
    expect(back.status).toBe(409);

    const done = await s.api(`/admin/tenants/${t.tenantId}/purge`, { ...superAuth(), body: { confirm: t.tenantId } });
    expect(done.status).toBe(200);
    expect(done.body.data.status).toBe('purged');
    expect(done.body.data.kept).toEqual(['tenancy.audit_log']);
    // Counted over both runs: every row that was there before, but for the step that was cut short (what it
    // removed before its deadline was never answered).
    for (const [table, rows] of Object.entries(before)) {
      if (KEPT.has(table) || table.startsWith('usage.')) continue;
      expect(done.body.data.rowsRemoved[table] ?? 0, table).toBeGreaterThanOrEqual(rows.length);
    }
    expect(done.body.data.objectsRemoved).toBeGreaterThanOrEqual(Object.keys(objectsBefore).length);

    // Nothing left but the audit records, in any table with a tenant column or in the object store.
    const after = await rowsOf(t.tenantId);
    for (const [table, rows] of Object.entries(after)) {
      if (KEPT.has(table)) expect(rows.length, table).toBeGreaterThan(0);
      else expect(rows, table).toEqual([]);
    }
    expect(objectsOf(t.tenantId)).toEqual({});
    const [oauthLeft] = await sql`SELECT count(*)::int AS n FROM oauth.oidc_payloads WHERE payload->>'accountId' = ${t.tenantId}`;
    expect((oauthLeft as { n: number }).n).toBe(0);
    // Its keys are refused at once (the cached credentials went with TenantChanged).
    expect((await s.api('/api/images', { key: t.liveKey })).status).toBe(401);
    // The other tenant: row for row and object for object.
    expect(await rowsOf(keep.tenantId, true)).toEqual(keepRows);
    expect(objectsOf(keep.tenantId)).toEqual(keepObjects);
    // The audit log holds the purge with what it removed.
    const audit = await s.api(`/admin/audit-log?action=purgeTenant&tenant=${t.tenantId}`, { admin: true });
    expect(audit.status).toBe(200);
    const rec = audit.body.data.find((a: { changes: { outcome?: unknown } }) => a.changes.outcome);
    expect(rec.changes.outcome.objectsRemoved).toBe(done.body.data.objectsRemoved);
    // Sent again: the tenant is gone.
    const again = await s.api(`/admin/tenants/${t.tenantId}/purge`, { ...superAuth(), body: { confirm: t.tenantId } });
    expect(again.status).toBe(404);
  });
});
