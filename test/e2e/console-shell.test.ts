import { createDb } from '@imagegen/platform';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsoleBrowser,
  expectAccessible,
  expireConsoleSessions,
  launchConsoleBrowser,
  openConsole,
  screenshots,
  signInAdmin,
  signInTenant,
  startConsoleStack,
} from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';

/**
 * The web console's shell in headless Chromium (issue 38): sign-in as a tenant (API key) and as an admin (email and
 * password), no credential in storage or URLs, sign-out, an ended session bringing the sign-in back and then the page
 * that was open, theme from the system, keyboard focus, both widths; axe-core on every page, screenshots of each.
 */

let stack: TestStack;
let tenant: TestTenant;
let ui: ConsoleBrowser;

beforeAll(async () => {
  [stack, ui] = await Promise.all([startConsoleStack(), launchConsoleBrowser()]);
  tenant = await stack.createTenant();
});
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
});

/** Nothing the page can read holds a credential: storage is empty, the URL and the document name no key or token. */
async function expectNoCredentialInPage(page: Page, secrets: string[]) {
  const seen = await page.evaluate(() => ({
    local: JSON.stringify({ ...localStorage }),
    session: JSON.stringify({ ...sessionStorage }),
    cookie: document.cookie,
    url: location.href,
    html: document.documentElement.outerHTML,
  }));
  expect(seen.local).toBe('{}');
  expect(seen.session).toBe('{}');
  expect(seen.cookie).toBe(''); // HttpOnly: the page cannot read its session cookie
  for (const s of secrets) {
    expect(seen.url).not.toContain(s);
    expect(seen.html).not.toContain(s);
  }
}

describe('console shell', { timeout: 240_000 }, () => {
  it('a tenant signs in with an API key, sees its overview, and signs out; nothing the page keeps holds a credential', async () => {
    const { context, page, errors } = await ui.newPage();
    await openConsole(page, stack);
    await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
    await expect.poll(() => page.title()).toBe('Sign in · imagegen console');
    await expectAccessible(page, 'sign-in');
    await screenshots(page, 'sign-in');

    // A wrong key: the error in words, still signed out.
    await page.getByLabel('API key').fill('sk_test_wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Invalid or missing API key');

    await signInTenant(page, stack, tenant.testKey);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByText(`Tenant ${tenant.tenantId}`, { exact: false }).first().waitFor();
    await expect.poll(() => page.title()).toBe('Overview · imagegen console');
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'imagegen_console', httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(cookie.value).toMatch(/^cons_/);
    await expectNoCredentialInPage(page, [tenant.testKey, cookie.value]);
    await expectAccessible(page, 'tenant overview');
    await screenshots(page, 'tenant-overview');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
    // Ended server-side: the old cookie is refused.
    const after = await fetch(`${stack.baseUrl}/api/profile`, { headers: { cookie: `${cookie.name}=${cookie.value}` } });
    expect(after.status).toBe(401);
    expect(await context.cookies()).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('an admin signs in with email and password; an ended session brings the sign-in back, then the page that was open', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInAdmin(page, stack);
    await page.getByRole('heading', { name: 'Administration' }).waitFor();
    await page.getByText(stack.adminEmail).first().waitFor();
    await expect.poll(() => page.title()).toBe('Admin · imagegen console');
    await expectNoCredentialInPage(page, [stack.adminPassword, stack.adminToken, (await context.cookies())[0].value]);
    await expectAccessible(page, 'admin home');
    await screenshots(page, 'admin-home');

    // The session expires while the page is open: the next visit asks to sign in, then returns to that page.
    const sql = createDb(stack.env.DATABASE_URL, { schema: 'tenancy', max: 1 });
    try {
      await sql`UPDATE admin_sessions SET expires_at = now() - interval '1 second' WHERE revoked_at IS NULL`;
    } finally {
      await sql.end();
    }
    await openConsole(page, stack, '/admin?tab=keys');
    await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    expect(new URL(page.url()).searchParams.get('next')).toBe('/admin?tab=keys');
    await page.getByText('Sign in to continue to the page you opened').waitFor();
    await page.getByLabel('Email').fill(stack.adminEmail);
    await page.getByLabel('Password').fill(stack.adminPassword);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Administration' }).waitFor();
    expect(`${new URL(page.url()).pathname}${new URL(page.url()).search}`).toBe('/console/admin?tab=keys');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('a tenant opening a page signed out signs in and lands on that page; an expired session does the same', async () => {
    const { context, page, errors } = await ui.newPage();
    const here = () => `${new URL(page.url()).pathname}${new URL(page.url()).search}`;
    const signInWithKey = async () => {
      await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
      await page.getByText('Sign in to continue to the page you opened').waitFor();
      await page.getByLabel('API key').fill(tenant.testKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
    };

    // Signed out: /console/usage asks to sign in, remembering the page; signing in lands there.
    await openConsole(page, stack, '/usage?limit=3');
    await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    expect(new URL(page.url()).searchParams.get('next')).toBe('/usage?limit=3');
    await signInWithKey();
    await page.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
    expect(here()).toBe('/console/usage?limit=3');
    await expect.poll(() => page.title()).toBe('Usage · imagegen console');

    // The session expires (server-side) while the page is open: the next request of the page (here, the
    // navigation to Webhooks) is refused, the sign-in comes back remembering that page, and signing in returns to it.
    expect(await expireConsoleSessions(stack, tenant.tenantId)).toBe(1);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
    expect(new URL(page.url()).searchParams.get('next')).toBe('/webhooks');
    await expectAccessible(page, 'sign-in after the session ended');
    await signInWithKey();
    await page.getByRole('heading', { name: 'Webhooks', exact: true }).waitFor();
    expect(here()).toBe('/console/webhooks');

    // The session cookie is gone (deleted in the browser): reopening a page asks to sign in, then returns to it.
    await context.clearCookies();
    await openConsole(page, stack, '/sessions');
    await signInWithKey();
    await page.getByRole('heading', { name: 'Sessions', exact: true }).waitFor();
    expect(here()).toBe('/console/sessions');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('follows the system theme, shows focus, is keyboard reachable, and has a menu at 390 px', async () => {
    const { context, page } = await ui.newPage();
    await signInTenant(page, stack, tenant.testKey);
    const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await page.emulateMedia({ colorScheme: 'light' });
    const light = await background();
    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await background();
    expect(light).not.toBe(dark);
    await page.emulateMedia({ colorScheme: 'light' });

    // The first Tab reaches the skip link, visibly focused; Tab goes on through the navigation to Sign out.
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement;
      return { text: el.textContent, outline: getComputedStyle(el).outlineStyle };
    });
    expect(focused.text).toBe('Skip to content');
    expect(focused.outline).not.toBe('none');
    const reached: string[] = [];
    // Through every navigation entry (pages add theirs) to Sign out, at most 30 stops.
    while (reached.length < 30 && reached.at(-1) !== 'Sign out') {
      await page.keyboard.press('Tab');
      reached.push(await page.evaluate(() => document.activeElement?.textContent ?? ''));
    }
    expect(reached).toContain('Overview');
    expect(reached).toContain('Sign out');

    await page.setViewportSize({ width: 390, height: 844 });
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.isVisible()).toBe(false);
    await page.getByRole('button', { name: 'Menu' }).click();
    expect(await nav.isVisible()).toBe(true);
    await context.close();
  });

  it('an unknown console page says so, with a title', async () => {
    const { context, page } = await ui.newPage();
    await signInTenant(page, stack, tenant.testKey);
    await openConsole(page, stack, '/no/such/page');
    await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    await expect.poll(() => page.title()).toBe('Not found · imagegen console');
    await context.close();
  });
});
