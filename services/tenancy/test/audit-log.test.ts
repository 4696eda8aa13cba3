import { randomBytes } from 'node:crypto';
import { createLogger, loadConfig, type Principal, type Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../src/handlers/audit-log.js';
import { sweepAuditRecords } from '../src/service.js';
import { startTenancyHarness, type TenancyHarness } from './harness.js';

/** The audit log of tenancy (issue 40, item 5): RecordAudit, ListAuditLog, append-only, retention. */

const logger = createLogger('tenancy-audit-test', 'silent');
let h: TenancyHarness;
let client: TenancyHarness['client'];
let sql: Sql;

const superAdmin: Principal = { requestId: 'req-1', adminUserId: 'usr_boss', adminRole: 'super_admin', source: 'admin' };
const token: Principal = { requestId: 'req-2', adminRole: 'super_admin', source: 'admin' };
const tenant: Principal = { requestId: 'req-3', tenantId: 'acme', keyType: 'live', source: 'tenant_api' };
const internal: Principal = { requestId: 'req-4', source: 'internal' };

beforeAll(async () => {
  h = await startTenancyHarness({
    eventsPrefix: 'tenancyaudit',
    env: { CREDENTIALS_KEY: randomBytes(32).toString('base64'), AUDIT_LOG_RETENTION_DAYS: '30' },
  });
  ({ client, sql } = h);
});

afterAll(async () => {
  await h?.stop();
});

describe('audit log', () => {
  it('takes the actor from the principal, never from the message', async () => {
    const a = await client.recordAudit(
      { action: 'updateTenant', tenantId: 'acme', resourceId: undefined, changesJson: '{"is_active":false}' },
      superAdmin,
    );
    expect(a).toMatchObject({ actorType: 'admin_user', actor: 'usr_boss', actorRole: 'super_admin', action: 'updateTenant' });
    expect(a).toMatchObject({ tenantId: 'acme', requestId: 'req-1', source: 'admin' });
    expect(JSON.parse(a.changesJson)).toEqual({ is_active: false });
    const b = await client.recordAudit({ action: 'createTenant', tenantId: 'beta', changesJson: '{}' }, token);
    expect(b).toMatchObject({ actorType: 'admin_token', actor: 'admin-token', actorRole: 'super_admin' });
    const c = await client.recordAudit({ action: 'createWebhook', resourceId: '7', changesJson: '{}' }, tenant);
    expect(c).toMatchObject({ actorType: 'tenant', actor: 'acme', tenantId: 'acme', resourceId: '7' });
    expect(c.actorRole).toBeUndefined();
    const d = await client.recordAudit({ action: 'registerOAuthClient', changesJson: '{}', anonymousActor: 'oauth-client:abc' }, internal);
    expect(d).toMatchObject({ actorType: 'anonymous', actor: 'oauth-client:abc' });
    // An anonymous actor named by the caller never replaces a principal's.
    const e = await client.recordAudit({ action: 'x', changesJson: '{}', anonymousActor: 'someone-else' }, tenant);
    expect(e.actor).toBe('acme');
  });

  it('refuses a record without an action or with changes that are not a JSON object', async () => {
    await expect(client.recordAudit({ action: '', changesJson: '{}' }, superAdmin)).rejects.toMatchObject({ status: 400 });
    await expect(client.recordAudit({ action: 'a', changesJson: '[1]' }, superAdmin)).rejects.toMatchObject({ status: 400 });
    await expect(client.recordAudit({ action: 'a', changesJson: 'nope' }, superAdmin)).rejects.toMatchObject({ status: 400 });
  });

  it('lists newest first with filters and keyset pages', async () => {
    for (let i = 0; i < 7; i++) await client.recordAudit({ action: 'pageTest', tenantId: `p${i % 2}`, changesJson: `{"i":${i}}` }, token);
    const seen: number[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 5; page++) {
      const r = await client.listAuditLog({ action: 'pageTest', limit: 3, cursor }, superAdmin);
      seen.push(...r.records.map((x) => JSON.parse(x.changesJson).i));
      cursor = r.nextCursor;
      if (!cursor) break;
    }
    const rows = await sql`SELECT id, at::text, changes->>'i' AS i FROM audit_log WHERE action = 'pageTest' ORDER BY id`;
    expect(seen, JSON.stringify(rows)).toEqual([6, 5, 4, 3, 2, 1, 0]);
    const p1 = await client.listAuditLog({ action: 'pageTest', tenantId: 'p1', limit: 50 }, superAdmin);
    expect(p1.records.map((x) => JSON.parse(x.changesJson).i)).toEqual([5, 3, 1]);
    expect(p1.nextCursor).toBeUndefined();
    const byActor = await client.listAuditLog({ actor: 'usr_boss', limit: 50 }, superAdmin);
    expect(byActor.records.every((x) => x.actor === 'usr_boss')).toBe(true);
    expect(byActor.records.length).toBeGreaterThan(0);
    const future = await client.listAuditLog({ from: new Date(Date.now() + 60_000).toISOString(), limit: 50 }, superAdmin);
    expect(future.records).toEqual([]);
    const past = await client.listAuditLog({ to: '2000-01-01T00:00:00Z', limit: 50 }, superAdmin);
    expect(past.records).toEqual([]);
  });

  it('pages records of one millisecond by id, across ids of more digits (9, 10, ..., 99, 100)', async () => {
    // Many records share a millisecond under load; their ids cross from one digit count to the next here.
    await sql`INSERT INTO audit_log (at, actor_type, actor, action, request_id)
      SELECT date_trunc('milliseconds', now()), 'admin_token', 'admin-token', 'sameMs', 'r-' || n FROM generate_series(1, 120) n`;
    const ids = (await sql`SELECT id FROM audit_log WHERE action = 'sameMs' ORDER BY id DESC`).map((r) => String(r.id));
    expect(ids.some((id) => id.length === 2) && ids.some((id) => id.length === 3)).toBe(true);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const r = await client.listAuditLog({ action: 'sameMs', limit: 7, cursor }, superAdmin);
      seen.push(...r.records.map((x) => x.id));
      cursor = r.nextCursor;
    } while (cursor);
    expect(seen).toEqual(ids);
  });

  it('refuses a malformed cursor, time or limit', async () => {
    await expect(client.listAuditLog({ cursor: 'garbage!', limit: 10 }, superAdmin)).rejects.toMatchObject({ status: 400 });
    await expect(client.listAuditLog({ from: 'yesterday', limit: 10 }, superAdmin)).rejects.toMatchObject({ status: 400 });
    await expect(client.listAuditLog({ limit: 100_000 }, superAdmin)).rejects.toMatchObject({ status: 400 });
    const c = { at: new Date('2024-05-01T10:00:00.123Z'), id: '42' };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
  });

  it('is append-only: UPDATE, DELETE and TRUNCATE are refused outside the retention sweep', async () => {
    await expect(sql`UPDATE audit_log SET actor = 'someone' WHERE action = 'updateTenant'`).rejects.toThrow(/append-only/);
    await expect(sql`DELETE FROM audit_log WHERE action = 'updateTenant'`).rejects.toThrow(/append-only/);
    await expect(sql`TRUNCATE audit_log`).rejects.toThrow(/append-only/);
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM audit_log WHERE action = 'updateTenant'`;
    expect(n).toBe(1);
  });

  it('the retention sweep removes only records older than the retention', async () => {
    await sql`INSERT INTO audit_log (at, actor_type, actor, action, request_id)
      VALUES (now() - interval '31 days', 'admin_token', 'admin-token', 'oldOne', 'r-old'),
             (now() - interval '29 days', 'admin_token', 'admin-token', 'recentOne', 'r-recent')`;
    const removed = await sweepAuditRecords(sql, 30, logger);
    expect(removed).toBe(1);
    const left = await sql`SELECT action FROM audit_log WHERE action IN ('oldOne', 'recentOne')`;
    expect(left.map((r) => r.action)).toEqual(['recentOne']);
    // The sweep's permission ends with its transaction.
    await expect(sql`DELETE FROM audit_log WHERE action = 'recentOne'`).rejects.toThrow(/append-only/);
  });

  it('AUDIT_LOG_RETENTION_DAYS is a whole number of days, 400 by default', () => {
    expect(loadConfig({}).auditLogRetentionDays).toBe(400);
    expect(loadConfig({ AUDIT_LOG_RETENTION_DAYS: '0' }).auditLogRetentionDays).toBe(0);
    expect(() => loadConfig({ AUDIT_LOG_RETENTION_DAYS: '-1' })).toThrow(/AUDIT_LOG_RETENTION_DAYS/);
  });
});
