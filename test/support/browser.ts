import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createDb } from '@imagegen/platform';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { REPO_ROOT } from '../distributed/harness.js';
import { CHROMIUM } from '../e2e/mcp-support.js';
import { ensureConsoleBuilt } from './console.js';
import { startTestStack, type TestStack } from './stack.js';

/**
 * The web console's browser-test harness (issue 38): headless Chromium (playwright-core, /usr/bin/chromium) on a
 * test stack, one browser per test file. Signs in through the real sign-in page, scans pages with axe-core and
 * writes screenshots at both widths to test/browser/screenshots (git-ignored).
 */

export const WIDTHS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;
export const SCREENSHOTS = join(REPO_ROOT, 'test/browser/screenshots');

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface ConsoleBrowser {
  browser: Browser;
  /**
   * A new signed-out browser context (its own cookies) and page at the desktop width; `errors` collects the page's
   * uncaught exceptions and console errors (a CSP refusal is one), for expectNoPageErrors.
   */
  newPage(): Promise<{ context: BrowserContext; page: Page; errors: string[] }>;
  close(): Promise<void>;
}

export async function launchConsoleBrowser(): Promise<ConsoleBrowser> {
  await ensureConsoleBuilt();
  const browser = await chromium.launch(CHROMIUM);
  return {
    browser,
    async newPage() {
      const context = await browser.newContext({ viewport: WIDTHS.desktop, colorScheme: 'light' });
      // Generous bounds: the machine running the tests may be busy (these are limits, not timings asserted).
      context.setDefaultTimeout(90_000);
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (err) => errors.push(`exception: ${err.message}`));
      page.on('console', (m) => {
        // Failed API answers (a 401 after sign-out) are logged by Chromium as resource errors: not the page's fault.
        if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`);
      });
      return { context, page, errors };
    },
    close: () => browser.close(),
  };
}

/**
 * startTestStack once the console is built: the gateway reads services/console/dist when it starts, so a build
 * running meanwhile (sources newer than the build) must finish first.
 */
export async function startConsoleStack(opts: Parameters<typeof startTestStack>[0] = {}): Promise<TestStack> {
  await ensureConsoleBuilt();
  return startTestStack({ ...opts, env: { RATE_LIMIT_ADMIN_LOGIN_PER_MINUTE: '1000', ...opts.env } });
}

/** Opens a console path ("/", "/admin", "/images/3"); the app base /console is added. */
export async function openConsole(page: Page, stack: TestStack, path = '/'): Promise<void> {
  await page.goto(`${stack.baseUrl}/console${path === '/' ? '' : path}`);
}

/** Signs a tenant in with its API key through the sign-in page (landing on `path`, or the overview). */
export async function signInTenant(page: Page, stack: TestStack, apiKey: string, path = '/'): Promise<void> {
  await openConsole(page, stack, path);
  await page.getByRole('button', { name: 'Tenant (API key)' }).click();
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** Signs an administrator in with email and password through the sign-in page. */
export async function signInAdmin(page: Page, stack: TestStack, email = stack.adminEmail, password = stack.adminPassword, path = '/admin') {
  await openConsole(page, stack, path);
  await page.getByRole('button', { name: 'Administrator' }).click();
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's scan of the page (WCAG 2.x A and AA): every violation; the caller asserts what must be absent. */
export async function axeScan(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol: the console's CSP (rightly) refuses an injected inline script.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, opts: unknown) => Promise<{ violations: AxeViolation[] }> } }).axe;
    const r = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
}

/** Scans in light and dark: no serious or critical violation; returns the rest (reported, not failed). */
export async function expectAccessible(page: Page, label: string): Promise<AxeViolation[]> {
  const all: AxeViolation[] = [];
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    const v = await axeScan(page);
    const bad = v.filter((x) => x.impact === 'serious' || x.impact === 'critical');
    expect(bad, `${label} (${scheme}): ${JSON.stringify(bad, null, 1)}`).toEqual([]);
    all.push(...v);
  }
  await page.emulateMedia({ colorScheme: 'light' });
  // The axe figure of the closing notes: every scan's label and what it reported below serious.
  console.info(
    `axe ${label}: 0 serious or critical; minor/moderate: ${JSON.stringify([...new Set(all.map((v) => `${v.id} (${v.impact})`))])}`,
  );
  return all;
}

/** Screenshots of the page at 1280 and 390 px wide (test/browser/screenshots/<name>-<width>.png, git-ignored). */
export async function screenshots(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  for (const size of [WIDTHS.desktop, WIDTHS.phone]) {
    await page.setViewportSize(size);
    // Nothing wider than the viewport (the layout works at this width).
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, `${name} at ${size.width} px scrolls sideways`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(SCREENSHOTS, `${name}-${size.width}.png`), fullPage: true });
  }
  await page.setViewportSize(WIDTHS.desktop);
}

/** Expires the tenant's open console sessions server-side (as their 12 hours running out would); returns how many. */
export async function expireConsoleSessions(stack: TestStack, tenantId: string): Promise<number> {
  const sql = createDb(stack.env.DATABASE_URL, { schema: 'tenancy', max: 1 });
  try {
    const ended = await sql`UPDATE console_sessions SET expires_at = now() - interval '1 second'
      WHERE tenant_id = ${tenantId} AND ended_at IS NULL AND expires_at > now() RETURNING session_id`;
    return ended.length;
  } finally {
    await sql.end();
  }
}
