import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsoleBrowser,
  expectAccessible,
  launchConsoleBrowser,
  screenshots,
  signInTenant,
  startConsoleStack,
} from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';

/**
 * The console's studio (issue 38 item 4) in headless Chromium through the real stack: a generation submitted as an
 * async job shows its progress and log lines live, then its images in place; a provB model shows its own options and
 * hides provA's; a 400 is shown next to its field; a content block (the sandbox provider's [[safety]] directive) is
 * said in words. axe-core and screenshots.
 */

let stack: TestStack;
let ui: ConsoleBrowser;
let tenant: TestTenant;

beforeAll(async () => {
  [stack, ui] = await Promise.all([startConsoleStack(), launchConsoleBrowser()]);
  tenant = await stack.createTenant({ rate_limit_per_minute: 10_000 });
}, 90_000);
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
});

describe('console studio', { timeout: 150_000 }, () => {
  it('generates with options as a job: live progress and log lines, then the results in place', async () => {
    const preset = await stack.api('/api/style-presets', {
      key: tenant.liveKey,
      body: { name: 'Watercolour', prompt: 'soft watercolour' },
    });
    expect([200, 201]).toContain(preset.status);
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, tenant.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    expect(await page.title()).toBe('Studio · imagegen console');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Studio' }).waitFor();

    // The live length limit follows the model (provA 16,384; provB 32,000).
    await page.getByLabel('Model').selectOption('provA-flash-image');
    await page.getByLabel('Prompt', { exact: true }).fill('a lighthouse at dusk [[delay:1500]]');
    await page.getByText('/ 16,384').waitFor();
    await page.getByLabel('Resolution tier').selectOption('2k');
    await page.getByLabel('Thinking').check();
    await page.getByLabel('Images').selectOption('2');
    await page.getByLabel('Aspect ratio').selectOption('16:9');
    await page.getByLabel('Style preset').selectOption({ label: 'Watercolour' });
    await expectAccessible(page, 'studio');
    await screenshots(page, 'studio');

    await page.getByRole('button', { name: 'Generate' }).click();
    const progress = page.getByRole('region', { name: 'Progress' });
    await progress.waitFor();
    await progress.getByRole('progressbar', { name: 'Generation progress' }).waitFor();
    const log = page.getByRole('list', { name: 'Generation log' });
    await expect.poll(() => log.getByRole('listitem').count(), { timeout: 60_000 }).toBeGreaterThan(0);
    await expect.poll(() => page.getByTestId('job-status').textContent(), { timeout: 60_000 }).toBe('completed');
    expect(await page.getByTestId('job-percent').textContent()).toBe('100%');
    const results = page.getByRole('region', { name: 'Results' });
    await expect.poll(() => results.getByRole('link').count(), { timeout: 30_000 }).toBe(2);
    const href = await results.getByRole('link').first().getAttribute('href');
    expect(href).toMatch(/^\/console\/images\/\d+$/);
    const img = results.locator('img').first();
    expect(await img.getAttribute('loading')).toBe('lazy');
    expect(await img.getAttribute('width')).toBe('200');
    // A 16:9 image: its known height keeps the layout still while it loads.
    expect(Number(await img.getAttribute('height'))).toBeGreaterThan(100);
    expect(Number(await img.getAttribute('height'))).toBeLessThan(125);

    // The job really carried the options.
    const id = href?.split('/').pop();
    const detail = await stack.api(`/api/images/${id}`, { key: tenant.liveKey });
    expect(detail.status).toBe(200);
    expect(detail.body.data).toMatchObject({
      modelId: 'provA-flash-image',
      aspectRatio: '16:9',
      resolutionTier: '2k',
      stylePresetId: preset.body.data.id,
    });
    await expectAccessible(page, 'studio-results');
    await screenshots(page, 'studio-results');
    expect(errors).toEqual([]);
    await context.close();
  });

  it("a provB model shows its options and hides provA's; a 400 is shown next to its field", async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, tenant.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    await page.getByLabel('Model').selectOption('provA-pro-image');
    await page.getByLabel('Web search grounding').waitFor();
    await page.getByLabel('Model').selectOption('provB-image-2');
    await page.getByLabel('Quality').waitFor();
    for (const label of ['Size', 'Format', 'Background', 'Moderation']) await page.getByLabel(label, { exact: true }).waitFor();
    for (const label of ['Resolution tier', 'Thinking', 'Web search grounding']) expect(await page.getByLabel(label).count()).toBe(0);
    // Only the 2.5 models take xhigh/max and a transparent background; compression only with jpeg or webp.
    const options = (label: string) => page.getByLabel(label).locator('option').allTextContents();
    expect(await options('Quality')).toEqual(['Default', 'low', 'medium', 'high', 'auto']);
    expect(await options('Background')).toEqual(['Default', 'auto', 'opaque']);
    expect(await page.getByLabel('Compression (%)').count()).toBe(0);
    await page.getByLabel('Format').selectOption('webp');
    await page.getByLabel('Compression (%)').waitFor();
    await page.getByLabel('Model').selectOption('provB-image-2.5-flare');
    await expect.poll(() => options('Quality')).toEqual(['Default', 'low', 'medium', 'high', 'auto', 'xhigh', 'max']);
    expect(await options('Background')).toEqual(['Default', 'auto', 'opaque', 'transparent']);
    await page.getByText('/ 32,000').waitFor();
    await expectAccessible(page, 'studio-provB');
    await screenshots(page, 'studio-provB');

    // The server's 400 for the size lands next to the Size field.
    await page.getByLabel('Prompt', { exact: true }).fill('a red kite');
    await page.getByLabel('Size', { exact: true }).fill('huge');
    await page.getByRole('button', { name: 'Generate' }).click();
    const sizeField = page.locator('.field', { has: page.getByLabel('Size', { exact: true }) });
    await sizeField.getByText('size must be auto or WIDTHxHEIGHT (e.g. 1024x1536)').waitFor();
    expect(await page.getByLabel('Size', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    await page.getByRole('alert').filter({ hasText: 'Invalid request payload' }).waitFor();
    expect(errors.filter((e) => !/status of 400/.test(e))).toEqual([]);
    await context.close();
  });

  it("a model outside the tenant's allowlist is refused next to the model, with the allowed ones", async () => {
    const narrow = await stack.createTenant({ allowed_models: ['provA-flash-lite-image'], model_id: 'provA-flash-lite-image' });
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, narrow.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    await page.getByLabel('Model').selectOption('provB-image-2');
    await page.getByLabel('Prompt', { exact: true }).fill('a red kite');
    await page.getByRole('button', { name: 'Generate' }).click();
    const modelField = page.locator('.field', { has: page.getByLabel('Model') });
    await modelField.getByText('model_id provB-image-2 is not allowed for this tenant (allowed: provA-flash-lite-image)').waitFor();
    expect(await page.getByLabel('Model').getAttribute('aria-invalid')).toBe('true');
    expect(errors.filter((e) => !/status of 400/.test(e))).toEqual([]);
    await context.close();
  });

  it('a content block is said in words; an over-long prompt is refused before sending', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, tenant.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    await page.getByLabel('Model').selectOption('provA-flash-lite-image');
    await page.getByLabel('Prompt', { exact: true }).fill('something forbidden [[safety]]');
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.getByRole('alert').filter({ hasText: "The provider's safety filter blocked this content" }).waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('job-status').textContent()).toBe('failed');
    expect(await page.getByRole('region', { name: 'Results' }).count()).toBe(0);
    await expectAccessible(page, 'studio-blocked');
    await screenshots(page, 'studio-blocked');

    await page.getByLabel('Prompt', { exact: true }).fill('x'.repeat(16_385));
    await page.getByText('(1 too many)').waitFor();
    await page.getByText('prompt must be at most 16,384 characters for this model').waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });
});
