import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsoleBrowser,
  expectAccessible,
  launchConsoleBrowser,
  screenshots,
  signInAdmin,
  startConsoleStack,
} from '../support/browser.js';
import type { TestStack } from '../support/stack.js';

/**
 * The admin console in headless Chromium (issue 38, item 9) on the real stack: a super_admin creates a tenant and
 * sees its key once (then abbreviated), creates and revokes a key, edits the tenant (provider keys write-only),
 * deactivates it and its key is refused; invites an administrator, who accepts on the public page and is signed in;
 * an `admin` sees no super_admin control and the API answers 403 when the page's session calls one anyway.
 * axe-core and screenshots of every admin page.
 */

let stack: TestStack;
let ui: ConsoleBrowser;

beforeAll(async () => {
  [stack, ui] = await Promise.all([startConsoleStack(), launchConsoleBrowser()]);
});
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
});

/** The status of a tenant API call with this key (GET /api/images). */
async function keyStatus(key: string): Promise<number> {
  return (await stack.api('/api/images', { key })).status;
}

/** Waits for a key to be refused: revocation is effective "within seconds" (the gateway caches a key briefly). */
async function refusedStatus(key: string): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const s = await keyStatus(key);
    if (s !== 200) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  return 200;
}

/** The one-time reveal dialog: its secret values, then closes it; the values are gone from the page after. */
async function takeReveal(page: Page, title: string): Promise<string[]> {
  const dialog = page.getByRole('dialog', { name: title });
  // Either the dialog opens or the page says why not (the failure then names it).
  await dialog.or(page.locator('.banner-error')).first().waitFor();
  expect(await page.locator('.banner-error').allTextContents()).toEqual([]);
  const values = await dialog.locator('[data-secret]').allTextContents();
  await dialog
    .getByRole('button', { name: /^Copy / })
    .first()
    .click();
  await page
    .getByText(/copied$/)
    .last()
    .waitFor();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(values[0]);
  await dialog.getByRole('button', { name: 'Close' }).click();
  await dialog.waitFor({ state: 'hidden' });
  const html = await page.content();
  for (const v of values) expect(html).not.toContain(v);
  return values;
}

/** What an admin's console session answers when it calls the API itself (cookie + the session's CSRF token). */
async function callWithSession(page: Page, method: string, path: string, body: unknown): Promise<number> {
  return page.evaluate(
    async ({ method, path, body }) => {
      const s = (await (await fetch('/console/session')).json()) as { data: { csrfToken: string } };
      const r = await fetch(path, {
        method,
        headers: { 'content-type': 'application/json', 'x-csrf-token': s.data.csrfToken },
        body: JSON.stringify(body),
      });
      return r.status;
    },
    { method, path, body },
  );
}

describe('admin console', () => {
  let inviteLink = '';
  let tenantId = '';

  it('a super_admin sees the dashboard, creates a tenant and its key once, creates and revokes a key, edits and deactivates the tenant', async () => {
    const { context, page, errors } = await ui.newPage();
    page.setDefaultTimeout(15_000);
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    await signInAdmin(page, stack);

    // Dashboard (GET /admin/stats).
    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    await page.getByRole('table', { name: 'Services' }).waitFor();
    await expect.poll(() => page.title()).toBe('Dashboard · imagegen console');
    await expectAccessible(page, 'admin-stats');
    await screenshots(page, 'admin-stats');

    // Create a tenant: a wrong email is said next to the field; then created, its key shown once.
    tenantId = `ui${Date.now().toString(36)}`;
    await page.getByRole('link', { name: 'Tenants' }).click();
    await page.getByRole('heading', { name: 'Tenants' }).waitFor();
    await page.getByText('Create a tenant').click();
    await page.getByLabel('Tenant id').fill(tenantId);
    await page.getByLabel('Name', { exact: true }).fill('UI Tenant');
    await page.getByLabel('Contact email').fill('not-an-email');
    await page.getByRole('button', { name: 'Create tenant' }).click();
    await page.locator('.field-error').first().waitFor();
    expect(await page.locator('.field-invalid').getByLabel('Contact email').count()).toBe(1);
    await page.getByLabel('Contact email').fill('ops@example.com');
    await page.getByLabel('Monthly quota (MB)').fill('500');
    await page.getByLabel('provA keys', { exact: true }).fill('provA-first-key');
    await page.getByRole('button', { name: 'Create tenant' }).click();
    const [fullKey] = await takeReveal(page, "The new tenant's API keys");
    expect(fullKey).toMatch(/^sk_live_/);
    expect(await keyStatus(fullKey)).toBe(200);

    // Search finds it; the tenant page lists the key abbreviated, never in full.
    await page.getByLabel('Search tenants').fill(tenantId);
    await page.waitForURL(new RegExp(`q=${tenantId}`));
    expect(await page.getByRole('table').locator('tbody tr').count()).toBe(1);
    await expectAccessible(page, 'admin-tenants');
    await screenshots(page, 'admin-tenants');
    await page.getByRole('link', { name: tenantId }).click();
    await page.getByRole('heading', { name: `Tenant ${tenantId}` }).waitFor();
    await expect.poll(() => page.title()).toBe(`Tenant ${tenantId} · imagegen console`);
    const keysTable = page.getByRole('table', { name: `Keys of ${tenantId}` });
    const shown = (await keysTable.locator('code').first().textContent()) ?? '';
    expect(shown.length).toBeGreaterThan(4);
    expect(shown).not.toBe(fullKey);
    expect(await page.content()).not.toContain(fullKey);

    // A second key: revealed once, then revoked; the API refuses it.
    await page.getByLabel('Key name').fill('ci');
    await page.getByRole('button', { name: 'Create key' }).click();
    const [ciKey] = await takeReveal(page, 'New API key');
    expect(await keyStatus(ciKey)).toBe(200);
    // The confirmation is the console's own modal dialog: Cancel has the focus, Escape cancels (the key stays
    // active) and gives the focus back to the button that asked; asked again and confirmed, the key is revoked.
    const revokeCi = keysTable.getByRole('button', { name: 'Revoke ci' });
    await revokeCi.click();
    const ask = page.getByRole('dialog', { name: 'Revoke the key ci?' });
    await ask.waitFor();
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    await page.keyboard.press('Escape');
    await ask.waitFor({ state: 'detached' });
    expect(await revokeCi.evaluate((el) => el === document.activeElement)).toBe(true);
    expect(await keyStatus(ciKey)).toBe(200);
    await revokeCi.click();
    await ask.getByRole('button', { name: 'Revoke key' }).click();
    await keysTable.getByText(/^revoked /).waitFor();
    expect(await refusedStatus(ciKey)).toBe(401);
    expect(await keyStatus(fullKey)).toBe(200);

    // Edit quota, rate limit, models and a provider key (write-only: never shown back).
    const providerKey = `provA-secret-${Date.now()}`;
    await page.getByLabel('Monthly quota (MB)').fill('750');
    await page.getByLabel('Rate limit per minute').fill('42');
    await page.getByLabel('provB-image-2', { exact: true }).uncheck();
    await page.getByLabel('New provA keys (replace the pool)').fill(`${providerKey}, ${providerKey}-2`);
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('2 key(s) configured (never shown).').waitFor();
    expect(await page.getByLabel('New provA keys (replace the pool)').inputValue()).toBe('');
    expect(await page.content()).not.toContain(providerKey);
    const saved = await stack.api(`/admin/tenants/${tenantId}`, { admin: true });
    expect(saved.body.data.tenant).toMatchObject({ monthlyQuotaMb: 750, rateLimitPerMinute: 42 });
    expect(saved.body.data.tenant.allowedModels).not.toContain('provB-image-2');
    expect(saved.body.data.providerCredentials.provA).toEqual({ configured: true, keyCount: 2 });
    await expectAccessible(page, 'admin-tenant');
    await screenshots(page, 'admin-tenant');

    // Deactivate: its key is refused as SPEC 5 says (403 Tenant account is inactive); activate again.
    await page.getByRole('button', { name: 'Deactivate tenant' }).click();
    const deactivate = page.getByRole('dialog', { name: `Deactivate ${tenantId}?` });
    await deactivate.waitFor();
    await expectAccessible(page, 'admin-tenant-confirm');
    await deactivate.getByRole('button', { name: 'Deactivate' }).click();
    await page.getByRole('button', { name: 'Activate tenant' }).waitFor();
    expect(await refusedStatus(fullKey)).toBe(403);
    expect((await stack.api('/api/images', { key: fullKey })).body.error).toBe('Tenant account is inactive');

    // Admin users and invitations: invite an `admin`, the link shown with a copy button.
    await page.getByRole('link', { name: 'Admin users' }).click();
    await page.getByRole('table', { name: 'Administrators' }).getByText(stack.adminEmail).waitFor();
    await expectAccessible(page, 'admin-users');
    await screenshots(page, 'admin-users');
    await page.getByRole('link', { name: 'Invitations' }).click();
    await page.getByRole('heading', { name: 'Invite an administrator' }).waitFor();
    await page.getByLabel('Email', { exact: true }).fill(`new-admin-${tenantId}@example.com`);
    await page.getByRole('button', { name: 'Create invitation' }).click();
    [inviteLink] = await takeReveal(page, 'Invitation created');
    expect(inviteLink).toMatch(/\/console\/invitation#inv_/);
    // A second invitation, revoked.
    await page.getByLabel('Email', { exact: true }).fill(`revoked-${tenantId}@example.com`);
    await page.getByRole('button', { name: 'Create invitation' }).click();
    await takeReveal(page, 'Invitation created');
    await page.getByRole('button', { name: `Revoke the invitation for revoked-${tenantId}@example.com` }).click();
    await page.getByRole('row', { name: new RegExp(`revoked-${tenantId}.*revoked`) }).waitFor();
    await expectAccessible(page, 'admin-invitations');
    await screenshots(page, 'admin-invitations');
    expect(errors).toEqual([]);
    await context.close();
  }, 120_000);

  it('the invited admin sets a password on the public page and is signed in; super_admin controls are hidden and the API refuses them', async () => {
    expect(inviteLink).not.toBe('');
    const { context, page, errors } = await ui.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(inviteLink);
    await page.getByRole('heading', { name: 'Accept an invitation' }).waitFor();
    await page.getByLabel('Your name').waitFor();
    expect(page.url()).not.toContain('inv_'); // the token left the address bar at once
    await expect.poll(() => page.title()).toBe('Accept an invitation · imagegen console');
    // Too short a password is said next to the field, before any request.
    await page.getByLabel('Your name').fill('New Admin');
    await page.getByLabel('New password').fill('short');
    await page.getByLabel('Repeat the password').fill('short');
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await page.getByText('password must be at least 12 characters').waitFor();
    await expectAccessible(page, 'invitation-accept');
    await screenshots(page, 'invitation-accept');
    const password = 'a long enough password 1';
    await page.getByLabel('New password').fill(password);
    await page.getByLabel('Repeat the password').fill(password);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await page.getByText(`new-admin-${tenantId}@example.com (admin)`).waitFor();
    // The link is used up.
    const again = await ui.newPage();
    await again.page.goto(inviteLink);
    await again.page.getByText(/not valid any more|is accepted/).waitFor();
    await again.context.close();

    // An `admin` sees the lists but none of the super_admin controls.
    await page.getByRole('link', { name: 'Tenants' }).click();
    await page.getByRole('link', { name: tenantId }).waitFor();
    expect(await page.getByText('Create a tenant').count()).toBe(0);
    await page.getByRole('link', { name: tenantId }).click();
    await page.getByRole('table', { name: `Keys of ${tenantId}` }).waitFor();
    for (const name of ['Activate tenant', 'Deactivate tenant', 'Save settings', 'Create key', /^Revoke/]) {
      expect(await page.getByRole('button', { name }).count()).toBe(0);
    }
    await page.getByText('Only a super_admin can').waitFor();
    await page.getByRole('link', { name: 'Admin users' }).click();
    await page.getByRole('table', { name: 'Administrators' }).getByText(stack.adminEmail).waitFor();
    expect(await page.getByRole('combobox').count()).toBe(0);
    expect(await page.getByRole('button', { name: /^(Deactivate|Activate|Unlock) / }).count()).toBe(0);
    await page.getByRole('link', { name: 'Invitations' }).click();
    await page.getByRole('table', { name: 'Invitations' }).waitFor();
    expect(await page.getByRole('button', { name: 'Create invitation' }).count()).toBe(0);

    // The API enforces it all the same: the page's own session calling a super_admin route gets 403.
    expect(await callWithSession(page, 'PATCH', `/admin/tenants/${tenantId}`, { is_active: true })).toBe(403);
    expect(await callWithSession(page, 'POST', '/admin/invitations', { email: 'x@example.com' })).toBe(403);
    expect((await stack.api(`/admin/tenants/${tenantId}`, { admin: true })).body.data.tenant.isActive).toBe(false);
    expect(errors).toEqual([]);
    await context.close();
  }, 60_000);
});
