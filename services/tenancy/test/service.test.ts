import { randomBytes } from 'node:crypto';
import { TenantChanged } from '@imagegen/contracts/events/v1/events';
import type { EventMessage, Sql } from '@imagegen/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/support/wait.js';
import { decryptSecret, sha256Hex } from '../src/crypto.js';
import { SIGNED_KEY_ELSEWHERE } from '../src/handlers/api-keys.js';
import { readSigningSecrets } from '../src/repositories/api-keys.js';
import { start } from '../src/service.js';
import { startTenancyHarness, type TenancyHarness } from './harness.js';

let h: TenancyHarness;
let client: TenancyHarness['client'];
let sql: Sql;
const received: EventMessage[] = [];
const p = { requestId: 'test', source: 'internal' };

const context = (env: Record<string, string>) => h.context(env);

const credentialsKey = randomBytes(32);
/** SIGNING_SECRET_GRACE_MS of the service under test. */
const GRACE_MS = 90_000;

const baseEnv = () => ({
  CREDENTIALS_KEY: credentialsKey.toString('base64'),
  SIGNING_SECRET_GRACE_MS: String(GRACE_MS),
  ADMIN_EMAIL: 'Boss@Example.com',
  ADMIN_PASSWORD: 'a very long password',
});

beforeAll(async () => {
  h = await startTenancyHarness({ eventsPrefix: 'tenancytest', env: baseEnv(), received });
  ({ client, sql } = h);
});

afterAll(async () => {
  await h?.stop();
});

describe('tenancy service', () => {
  it('refuses to start without CREDENTIALS_KEY', async () => {
    await expect(start(context({}))).rejects.toThrow(/CREDENTIALS_KEY/);
  });

  it('creates the first super_admin from configuration, once', async () => {
    const second = await start(context(baseEnv()));
    await second.stop();
    const users = await sql`SELECT email, role, password_hash FROM admin_users`;
    expect(users).toHaveLength(1);
    expect(users[0].email).toBe('boss@example.com');
    expect(users[0].role).toBe('super_admin');
    expect(users[0].password_hash).not.toContain('a very long password');
  });

  it('stores keys only as hashes and provider credentials only encrypted', async () => {
    const r = await client.createTenant(
      {
        tenantId: 'Acme',
        tenantName: 'Acme',
        contactEmail: 'ops@acme.test',
        providerPools: [{ provider: 'provA', keys: ['plain-provider-secret-1', 'plain-provider-secret-2'], remove: false }],
        allowedModels: [],
        hasAllowedModels: false,
        apiKeys: [],
        hasApiKeys: false,
      },
      p,
    );
    expect(r.tenant?.tenantId).toBe('acme');
    expect(r.tenant?.allowedModels).toEqual(['provA-flash-lite-image', 'provA-flash-image', 'provA-pro-image']);
    expect(r.apiKeys.map((k) => k.type).sort()).toEqual(['live', 'test']);
    const rows = await sql`SELECT * FROM api_keys WHERE tenant_id = 'acme'`;
    const dump = JSON.stringify(rows, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    for (const k of r.apiKeys) {
      expect(dump).not.toContain(k.apiKey);
      expect(rows.some((row) => row.key_hash === sha256Hex(k.apiKey))).toBe(true);
    }
    const creds = await sql`SELECT encrypted FROM provider_credentials WHERE tenant_id = 'acme'`;
    expect(creds[0].encrypted.toString('latin1')).not.toContain('plain-provider-secret');
    const dec = await client.getProviderCredentials({ tenantId: 'acme', provider: 'provA' }, p);
    expect(dec.keys).toEqual(['plain-provider-secret-1', 'plain-provider-secret-2']);
    expect((await client.getProviderCredentials({ tenantId: 'acme', provider: 'provB' }, p)).keys).toEqual([]);
    await expect(client.getProviderCredentials({ tenantId: 'nope', provider: 'provA' }, p)).rejects.toMatchObject({ status: 404 });
  });

  it('publishes TenantChanged through the outbox', async () => {
    await client.updateTenant(
      { tenantId: 'acme', isActive: false, clearNotes: false, allowedModels: [], hasAllowedModels: false, providerPools: [] },
      p,
    );
    await waitFor(() => received.some((m) => TenantChanged.decode(m.data).reason === 'deactivated'), {
      message: 'TenantChanged deactivated',
    });
    const created = received.map((m) => TenantChanged.decode(m.data)).find((e) => e.reason === 'created');
    expect(created?.tenantId).toBe('acme');
    expect(received[0].subject).toBe('tenancytest.tenancy.tenant_changed');
  });

  it('authenticates keys, reports inactive tenants, refuses revoked keys, and batches usage', async () => {
    const t = await client.createTenant(
      {
        tenantId: 'beta',
        tenantName: 'Beta',
        contactEmail: 'b@beta.test',
        providerPools: [{ provider: 'provB', keys: ['k'], remove: false }],
        allowedModels: [],
        hasAllowedModels: false,
        apiKeys: [{ keyName: 'main', type: 'live' }],
        hasApiKeys: true,
      },
      p,
    );
    expect(t.tenant?.modelId).toBe('provB-image-2');
    const hash = sha256Hex(t.apiKeys[0].apiKey);
    const a = await client.authenticateApiKey({ keyHash: hash }, p);
    expect(a).toMatchObject({ tenantId: 'beta', keyType: 'live', keyName: 'main', tenantActive: true, rateLimitPerMinute: 60 });
    await client.recordApiKeyUsage({ uses: [{ keyHash: hash, count: 4, lastUsedAt: new Date().toISOString() }] }, p);
    await expect
      .poll(async () => Number((await sql`SELECT usage_count FROM api_keys WHERE key_hash = ${hash}`)[0].usage_count), { timeout: 5000 })
      .toBe(5);
    const detail = await client.getTenantDetail({ tenantId: 'beta' }, p);
    expect(detail.apiKeys[0].lastUsedAt).toBeTruthy();
    await client.revokeApiKey({ tenantId: 'beta', keyRef: 'main' }, p);
    await expect(client.authenticateApiKey({ keyHash: hash }, p)).rejects.toMatchObject({
      status: 401,
      body: { error: 'Invalid or missing API key' },
    });
    await expect(client.authenticateApiKey({ keyHash: sha256Hex('unknown') }, p)).rejects.toMatchObject({ status: 401 });
  });

  it('counts failed logins and locks after five', async () => {
    for (let i = 0; i < 5; i++) {
      await expect(client.adminLogin({ email: 'boss@example.com', password: 'wrong', ip: '', userAgent: '' }, p)).rejects.toMatchObject({
        status: 401,
      });
    }
    await expect(
      client.adminLogin({ email: 'boss@example.com', password: 'a very long password', ip: '', userAgent: '' }, p),
    ).rejects.toMatchObject({ status: 423 });
    const [u] = await sql`SELECT user_id, failed_login_attempts, locked_until FROM admin_users`;
    expect(u.failed_login_attempts).toBe(5);
    expect(u.locked_until).toBeTruthy();
    await client.unlockAdminUser({ userId: u.user_id }, p);
    const s = await client.adminLogin({ email: 'BOSS@example.com', password: 'a very long password', ip: '', userAgent: '' }, p);
    expect(s.token).toMatch(/^adms_/);
    const [sess] = await sql`SELECT token_hash FROM admin_sessions`;
    expect(sess.token_hash).toBe(sha256Hex(s.token));
    const me = await client.authenticateAdminSession({ tokenHash: sha256Hex(s.token) }, p);
    expect(me.role).toBe('super_admin');
  });

  it('two invitations of one email accepted at once: one admin user, the other a 409 (never a 500)', async () => {
    const email = 'race@example.com';
    const invites = await Promise.all([0, 1].map(() => client.createInvitation({ email, role: 'admin', expiresInDays: 7 }, p)));
    let accepting: Promise<PromiseSettledResult<unknown>[]> | undefined;
    // Hold back inserts into admin_users (SHARE blocks INSERT, not SELECT) until both accepts have looked the
    // email up and wait at their INSERT: the interleaving that lets both pass the look-up, made certain.
    await sql.begin(async (tx) => {
      await tx`LOCK TABLE admin_users IN SHARE MODE`;
      accepting = Promise.allSettled(
        invites.map((i) => client.acceptInvitation({ token: i.token, displayName: 'Racer', password: 'a long enough password' }, p)),
      );
      const waiting = async () => {
        const [{ n }] = await sql`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO admin_users%'`;
        return n;
      };
      await waitFor(async () => (await waiting()) >= 2, { message: 'both accepts waiting at their insert' });
    });
    const results = await (accepting as Promise<PromiseSettledResult<unknown>[]>);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toMatchObject({
      status: 409,
      message: expect.stringContaining('already exists'),
    });
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM admin_users WHERE lower(email) = ${email}`;
    expect(n).toBe(1);
  });
  it('a sign-in whose password check overlaps a lockout does not lift it', async () => {
    const [u] = await sql`SELECT user_id FROM admin_users WHERE email = 'boss@example.com'`;
    const sessionsOf = async (userId: string) => (await sql`SELECT count(*)::int AS n FROM admin_sessions WHERE user_id = ${userId}`)[0].n;
    const sessionsBefore = await sessionsOf(u.user_id);
    let login: Promise<unknown> | undefined;
    // Hold the user's row while the right password is checked, then lock the account as five failed attempts
    // landing meanwhile would: the success must not clear that lock.
    await sql.begin(async (tx) => {
      await tx`SELECT 1 FROM admin_users WHERE user_id = ${u.user_id} FOR UPDATE`;
      login = client.adminLogin({ email: 'boss@example.com', password: 'a very long password', ip: '', userAgent: '' }, p).then(
        () => 'signed in',
        (err) => err,
      );
      await waitFor(
        async () =>
          (
            await sql`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SET failed_login_attempts = 0%'`
          )[0].n > 0,
        { message: 'the sign-in waiting at its update' },
      );
      await tx`UPDATE admin_users SET failed_login_attempts = 5, locked_until = now() + interval '15 minutes' WHERE user_id = ${u.user_id}`;
    });
    expect(await login).toMatchObject({ status: 423 });
    const [after] = await sql`SELECT failed_login_attempts, locked_until FROM admin_users WHERE user_id = ${u.user_id}`;
    expect(after.failed_login_attempts).toBe(5);
    expect(after.locked_until).toBeTruthy();
    expect(await sessionsOf(u.user_id)).toBe(sessionsBefore); // no session was made
    await client.unlockAdminUser({ userId: u.user_id }, p);
  });
});

/**
 * Signed requests (SPEC 5.8, extension): the signing state of a key, its secrets encrypted at rest, rotation with the
 * configured grace period (SIGNING_SECRET_GRACE_MS) or the one the rotation names, and what AuthenticateApiKey gives
 * a caller that verifies signatures (the gateway) and refuses one that does not (mcp, the OAuth sign-in).
 */
describe('signed requests', () => {
  let keyHash = '';
  let keyId = '';

  beforeAll(async () => {
    const t = await client.createTenant(
      {
        tenantId: 'signer',
        tenantName: 'Signer',
        contactEmail: 'ops@signer.test',
        providerPools: [{ provider: 'provA', keys: ['k'], remove: false }],
        allowedModels: [],
        hasAllowedModels: false,
        apiKeys: [
          { keyName: 'main', type: 'live' },
          { keyName: 'spare', type: 'test' },
        ],
        hasApiKeys: true,
      },
      p,
    );
    keyHash = sha256Hex(t.apiKeys[0].apiKey);
    keyId = t.apiKeys[0].keyId;
  });

  it('a key without the flag: authenticated as before, no secrets, rotation refused (409)', async () => {
    const a = await client.authenticateApiKey({ keyHash }, p);
    expect(a).toMatchObject({ keyId, signatureRequired: false, signingSecrets: [] });
    await expect(client.rotateApiKeySigningSecret({ tenantId: 'signer', keyRef: 'main' }, p)).rejects.toMatchObject({
      status: 409,
      body: { error: 'Signed requests are not enabled for this API key' },
    });
  });

  it('turning it on: the secret once, encrypted at rest, given only to a caller that verifies signatures', async () => {
    const on = await client.setApiKeySigning({ tenantId: 'Signer', keyRef: 'main', signatureRequired: true }, p);
    expect(on).toMatchObject({ keyId, keyName: 'main', signatureRequired: true, previousSecretExpiresAt: undefined });
    const secret = on.signingSecret as string;
    expect(secret).toMatch(/^sigsec_[\w-]{43}$/);
    const again = await client.setApiKeySigning({ tenantId: 'signer', keyRef: keyId, signatureRequired: true }, p);
    expect(again.signingSecret).toBeUndefined();

    const [row] = await sql<{ signing_secret: Buffer }[]>`SELECT signing_secret FROM api_keys WHERE key_id = ${keyId}`;
    expect(row.signing_secret.toString('latin1')).not.toContain(secret.slice(7));
    expect(decryptSecret(credentialsKey, row.signing_secret, `signer:${keyId}:signing`)).toBe(secret);

    await expect(client.authenticateApiKey({ keyHash }, p)).rejects.toMatchObject({ status: 401, body: { error: SIGNED_KEY_ELSEWHERE } });
    const a = await client.authenticateApiKey({ keyHash, verifiesSignatures: true }, p);
    expect(a).toMatchObject({ signatureRequired: true, signingSecrets: [{ secret }] });
    expect(a.signingSecrets[0].expiresAt).toBeUndefined();

    const detail = await client.getTenantDetail({ tenantId: 'signer' }, p);
    expect(detail.apiKeys.map((k) => [k.keyName, k.signatureRequired])).toEqual([
      ['main', true],
      ['spare', false],
    ]);
    await waitFor(() => received.some((m) => TenantChanged.decode(m.data).reason === 'api_key_signing'), {
      message: 'TenantChanged api_key_signing',
    });
  });

  it('rotation keeps the previous secret for SIGNING_SECRET_GRACE_MS, or the grace the rotation names (0: none)', async () => {
    const before = (await client.authenticateApiKey({ keyHash, verifiesSignatures: true }, p)).signingSecrets[0].secret;
    const r = await client.rotateApiKeySigningSecret({ tenantId: 'signer', keyRef: 'main' }, p);
    expect(r.signingSecret).not.toBe(before);
    expect(Date.parse(r.previousSecretExpiresAt as string) - Date.parse(r.secretCreatedAt as string)).toBeGreaterThanOrEqual(
      GRACE_MS - 1000,
    );
    expect(Date.parse(r.previousSecretExpiresAt as string) - Date.parse(r.secretCreatedAt as string)).toBeLessThanOrEqual(GRACE_MS + 1000);
    const both = await client.authenticateApiKey({ keyHash, verifiesSignatures: true }, p);
    expect(both.signingSecrets.map((x) => x.secret)).toEqual([r.signingSecret, before]);
    expect(both.signingSecrets[1].expiresAt).toBe(r.previousSecretExpiresAt);

    // A previous secret past its grace is not given out (the row keeps it until the next change).
    await sql`UPDATE api_keys SET previous_signing_secret_expires_at = now() - interval '1 second' WHERE key_id = ${keyId}`;
    expect((await readSigningSecrets(sql, credentialsKey, 'signer', keyId))?.previous).toBeUndefined();

    const none = await client.rotateApiKeySigningSecret({ tenantId: 'signer', keyRef: 'main', gracePeriodSeconds: 0 }, p);
    expect(none.previousSecretExpiresAt).toBeUndefined();
    const [row] = await sql<
      { previous_signing_secret: Buffer | null }[]
    >`SELECT previous_signing_secret FROM api_keys WHERE key_id = ${keyId}`;
    expect(row.previous_signing_secret).toBeNull();
    expect((await client.authenticateApiKey({ keyHash, verifiesSignatures: true }, p)).signingSecrets).toEqual([
      { secret: none.signingSecret },
    ]);
    await expect(
      client.rotateApiKeySigningSecret({ tenantId: 'signer', keyRef: 'main', gracePeriodSeconds: 7 * 86_400 + 1 }, p),
    ).rejects.toMatchObject({ status: 400, body: { details: ['grace_period_seconds must be an integer between 0 and 604800'] } });
  });

  it('unknown, revoked and other tenants keys are 404; turning it off forgets the secrets', async () => {
    await expect(client.setApiKeySigning({ tenantId: 'signer', keyRef: 'nope', signatureRequired: true }, p)).rejects.toMatchObject({
      status: 404,
      body: { error: 'API key not found' },
    });
    await expect(client.setApiKeySigning({ tenantId: 'other', keyRef: keyId, signatureRequired: true }, p)).rejects.toMatchObject({
      status: 404,
      body: { error: 'Tenant not found' },
    });
    await client.revokeApiKey({ tenantId: 'signer', keyRef: 'spare' }, p);
    await expect(client.setApiKeySigning({ tenantId: 'signer', keyRef: 'spare', signatureRequired: true }, p)).rejects.toMatchObject({
      status: 404,
    });

    const off = await client.setApiKeySigning({ tenantId: 'signer', keyRef: 'main', signatureRequired: false }, p);
    expect(off).toEqual({ keyId, keyName: 'main', signatureRequired: false });
    const [row] =
      await sql`SELECT signing_secret, signing_secret_created_at, previous_signing_secret FROM api_keys WHERE key_id = ${keyId}`;
    expect(row).toEqual({ signing_secret: null, signing_secret_created_at: null, previous_signing_secret: null });
    expect(await client.authenticateApiKey({ keyHash }, p)).toMatchObject({ signatureRequired: false, signingSecrets: [] });
  });
});
