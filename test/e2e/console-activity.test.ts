import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../../services/webhook-dispatcher/test/receiver.js';
import {
  type ConsoleBrowser,
  expectAccessible,
  expireConsoleSessions,
  launchConsoleBrowser,
  openConsole,
  screenshots,
  signInTenant,
  startConsoleStack,
} from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';
import { startBalancer } from '../upgrade/balancer.js';

/**
 * The console's usage, webhooks, sessions and executions pages (issue 38 items 6-8) in headless Chromium through the
 * real stack: usage moves after a generation; a webhook to a local HTTPS receiver is created (its secret shown once),
 * tested, and its delivery appears in the log; a session and an execution show their logs. axe-core and screenshots.
 */

let stack: TestStack;
let ui: ConsoleBrowser;
let rx: Receiver;
let tenant: TestTenant;

beforeAll(async () => {
  rx = await startReceiver();
  [stack, ui] = await Promise.all([
    startConsoleStack({ env: { WEBHOOK_CA_FILE: rx.caFile, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_POLL_MS: '10' } }),
    launchConsoleBrowser(),
  ]);
  tenant = await stack.createTenant({ rate_limit_per_minute: 10_000 });
}, 90_000);
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
  await rx?.stop();
});

async function signInAt(page: Page, path: string) {
  await signInTenant(page, stack, tenant.liveKey);
  await openConsole(page, stack, path);
}

describe('console activity pages', { timeout: 150_000 }, () => {
  it('usage moves after a generation; sessions and executions show their logs', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInAt(page, '/usage');
    await page.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
    await expect.poll(() => page.title()).toBe('Usage · imagegen console');
    await expect.poll(() => page.getByTestId('recent-images').textContent()).toBe('0');
    await page.getByRole('img', { name: /MB used this month \(0%\)/ }).waitFor();

    const gen = await stack.api('/api/images', { key: tenant.liveKey, body: { prompt: 'a paper boat on a pond', n: 2 } });
    expect(gen.status).toBe(200);
    const { executionId, metadata } = gen.body.data;
    await page.reload();
    await expect.poll(() => page.getByTestId('recent-images').textContent()).toBe('2');
    await page
      .getByRole('table', { name: 'Usage by month, newest first' })
      .getByRole('cell', { name: new Date().toISOString().slice(0, 7) })
      .waitFor();
    await expectAccessible(page, 'usage');
    await screenshots(page, 'usage');

    // Sessions: the generation's session, then its detail with the execution and its log.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('heading', { name: 'Sessions', exact: true }).waitFor();
    await page.getByRole('link', { name: metadata.session_id }).click();
    await page.getByRole('heading', { name: 'Session', exact: true }).waitFor();
    await page.getByRole('table', { name: 'Executions, newest first' }).getByRole('link').first().waitFor();
    await expect.poll(() => page.locator('.thumbs img').count()).toBe(2);
    await expectAccessible(page, 'session');
    await screenshots(page, 'session');
    await page.getByRole('table', { name: 'Executions, newest first' }).getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Execution', exact: true }).waitFor();
    expect(page.url()).toContain(encodeURIComponent(executionId));
    await page.getByText('completed', { exact: true }).first().waitFor();
    await expect.poll(() => page.getByRole('list', { name: 'Execution log' }).getByRole('listitem').count()).toBeGreaterThan(0);
    await expectAccessible(page, 'execution');
    await screenshots(page, 'execution');

    await openConsole(page, stack, '/sessions');
    await page.getByRole('heading', { name: 'Sessions', exact: true }).waitFor();
    await page.getByRole('link', { name: metadata.session_id }).waitFor();
    await expectAccessible(page, 'sessions');
    await screenshots(page, 'sessions');

    // A live log open while the session ends server-side: its connection drops (a proxy in between restarts), the
    // stream's reconnection is refused (401), and the sign-in comes back for that page rather than "interrupted".
    // The page is reached through a TCP proxy on another port of the same host (the session cookie goes along).
    const sessionPath = `/sessions/${encodeURIComponent(metadata.session_id)}`;
    const proxy = await startBalancer();
    proxy.add(new URL(stack.baseUrl).host);
    await page.goto(`${proxy.url}/console${sessionPath}`);
    await page.getByText('Following the running executions of this session.').waitFor();
    expect(await expireConsoleSessions(stack, tenant.tenantId)).toBeGreaterThan(0);
    try {
      proxy.dropConnections();
      await page.getByRole('heading', { name: 'Sign in to imagegen' }).waitFor();
      expect(new URL(page.url()).searchParams.get('next')).toBe(sessionPath);
    } finally {
      await proxy.close();
    }
    // Chromium logs the refused reconnection of the EventSource (a 401): not the page's fault.
    expect(errors.filter((e) => !/EventSource/.test(e))).toEqual([]);
    await context.close();
  });

  it('creates a webhook (secret shown once), sends a test and sees the delivery in the log; pauses and re-enables it', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInAt(page, '/webhooks');
    await page.getByRole('heading', { name: 'Webhooks', exact: true }).waitFor();
    await page.getByRole('button', { name: 'New webhook' }).click();
    const dialog = page.getByRole('dialog', { name: 'New webhook' });
    // Plain HTTP is refused in words next to the field.
    await dialog.getByLabel('Endpoint URL').fill('http://example.com/hook');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => dialog.locator('.field-error').first().textContent()).toContain('Webhook URL must use HTTPS');
    await dialog.getByLabel('Endpoint URL').fill(rx.url('/console'));
    await dialog.getByLabel('Description').fill('console test');
    await dialog.getByRole('button', { name: 'Create' }).click();

    const secretDialog = page.getByRole('dialog', { name: 'Webhook created: copy its secret' });
    const secret = (await secretDialog.getByTestId('webhook-secret').textContent()) ?? '';
    expect(secret).toMatch(/^whsec_/);
    await expectAccessible(page, 'webhook secret');
    await screenshots(page, 'webhook-secret');
    await secretDialog.getByRole('button', { name: 'Close' }).click();
    // Shown once: the list has only its hint; nothing the page keeps holds it.
    await page.getByRole('link', { name: rx.url('/console') }).waitFor();
    expect(await page.content()).not.toContain(secret);
    expect(await page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }))).toBe('{}');
    await expectAccessible(page, 'webhooks');
    await screenshots(page, 'webhooks');

    await page.getByRole('link', { name: rx.url('/console') }).click();
    await page.getByRole('heading', { name: 'Webhook', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Send test' }).click();
    const log = page.getByRole('table', { name: 'Deliveries, newest first' });
    await log.getByRole('cell', { name: 'webhook.test' }).waitFor();
    await log.getByText('succeeded').waitFor();
    await log.getByRole('cell', { name: 'HTTP 200' }).waitFor();
    expect(rx.received.some((r) => r.path === '/console')).toBe(true);
    await expectAccessible(page, 'webhook deliveries');
    await screenshots(page, 'webhook');

    // Paused, then re-enabled (the tenant's own PATCH enabled).
    await page.getByRole('button', { name: 'Pause deliveries' }).click();
    await page
      .getByText(/Disabled/)
      .first()
      .waitFor();
    await page.getByRole('button', { name: 'Re-enable' }).click();
    await page.getByRole('button', { name: 'Pause deliveries' }).waitFor();
    const w = await stack.api('/api/webhooks', { key: tenant.liveKey });
    expect(w.body.data[0].enabled).toBe(true);
    expect(errors).toEqual([]);
    await context.close();
  });
});
