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
import { waitFor } from '../support/wait.js';
import { noisePng, startImageServer } from './usage-support.js';

/**
 * The console's studio (issue 38 item 4) in headless Chromium through the real stack: a generation submitted as an
 * async job shows its progress and log lines live, then its images in place; a provB model shows its own options and
 * hides provA's; only the tenant's models are offered (GET /api/profile), its default chosen, and a refused model
 * is said next to the model; a character, a product and a scene picked from the tenant's own reach the image; a 400
 * is shown next to its field; a used-up quota (402), a rate limit with its wait (429) and a content block (the
 * sandbox provider's [[safety]] directive) are said in words. axe-core and screenshots.
 */

let stack: TestStack;
let ui: ConsoleBrowser;
let tenant: TestTenant;
let images: Awaited<ReturnType<typeof startImageServer>>;

beforeAll(async () => {
  [stack, ui, images] = await Promise.all([startConsoleStack(), launchConsoleBrowser(), startImageServer()]);
  tenant = await stack.createTenant({ rate_limit_per_minute: 10_000 });
}, 90_000);
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
  await images?.stop();
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
    await expect.poll(() => page.title()).toBe('Studio · imagegen console');
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

  it("offers the tenant's models only, its default preselected; a model withdrawn meanwhile is refused next to the model", async () => {
    const narrow = await stack.createTenant({
      allowed_models: ['provB-image-2', 'provA-flash-lite-image'],
      model_id: 'provB-image-2',
      rate_limit_per_minute: 10_000,
    });
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, narrow.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    // The profile's models (extension), in the catalogue's order; the default is chosen and its options shown.
    const model = page.getByLabel('Model');
    await expect.poll(() => model.locator('option').allTextContents()).toEqual(['provA-flash-lite-image', 'provB-image-2 (default)']);
    expect(await model.inputValue()).toBe('provB-image-2');
    await page.getByLabel('Quality').waitFor();
    expect(await page.getByLabel('Resolution tier').count()).toBe(0);
    await expectAccessible(page, 'studio-models');

    // An administrator withdraws provB-image-2 while the page is open: the API's refusal is said next to the model.
    const patch = await stack.api(`/admin/tenants/${narrow.tenantId}`, {
      method: 'PATCH',
      admin: true,
      body: { allowed_models: ['provA-flash-lite-image'], model_id: 'provA-flash-lite-image' },
    });
    expect(patch.status, JSON.stringify(patch.body)).toBe(200);
    await page.getByLabel('Prompt', { exact: true }).fill('a red kite');
    await page.getByRole('button', { name: 'Generate' }).click();
    const modelField = page.locator('.field', { has: model });
    await modelField.getByText('model_id provB-image-2 is not allowed for this tenant (allowed: provA-flash-lite-image)').waitFor();
    expect(await model.getAttribute('aria-invalid')).toBe('true');
    expect(errors.filter((e) => !/status of 400/.test(e))).toEqual([]);
    await context.close();
  });

  it("generates with a character, a product and a scene picked from the tenant's own; another tenant's are not offered", async () => {
    const own = (path: string, body: Record<string, unknown>, key = tenant.liveKey) => stack.api(path, { key, body });
    const ref = await own('/api/images', { prompt: 'a reference portrait', n: 1 });
    expect(ref.status).toBe(200);
    const character = await own('/api/characters', {
      character_name: 'Captain Ines',
      base_prompt: 'a sea captain with a red scarf and a brass spyglass',
      reference_image_ids: [ref.body.data.images[0].record_id],
    });
    expect(character.status, JSON.stringify(character.body)).toBe(200);
    const product = await own('/api/products', { product_name: 'Brass lantern', product_url: images.serve(noisePng(64, 64)) });
    expect([200, 201], JSON.stringify(product.body)).toContain(product.status);
    const scene = await own('/api/scenes', { scene_name: 'Harbour at night', scene_prompt: 'a harbour at night under the stars' });
    expect([200, 201], JSON.stringify(scene.body)).toContain(scene.status);
    // Another tenant's assets: never offered.
    const stranger = await stack.createTenant();
    expect(
      (await own('/api/characters', { character_name: 'Stranger', base_prompt: 'someone from elsewhere entirely' }, stranger.liveKey))
        .status,
    ).toBe(200);

    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, tenant.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    const characters = page.getByRole('group', { name: /^Characters/ });
    await characters.getByLabel('Captain Ines').check();
    expect(await characters.getByLabel('Stranger').count()).toBe(0);
    await page
      .getByRole('group', { name: /^Products/ })
      .getByLabel('Brass lantern')
      .check();
    await page.getByLabel('Scene').selectOption({ label: 'Harbour at night' });
    await page.getByLabel('Model').selectOption('provA-flash-lite-image');
    await page.getByLabel('Prompt', { exact: true }).fill('holding the lantern on the quay');
    await expectAccessible(page, 'studio-assets');
    await screenshots(page, 'studio-assets');
    await page.getByRole('button', { name: 'Generate' }).click();
    const results = page.getByRole('region', { name: 'Results' });
    await results.getByRole('link').first().waitFor({ timeout: 60_000 });
    const id = (await results.getByRole('link').first().getAttribute('href'))?.split('/').pop();

    // The image carries them: the scene and the product in its detail, the character and the scene in its prompt.
    const detail = await stack.api(`/api/images/${id}`, { key: tenant.liveKey });
    expect(detail.status).toBe(200);
    expect(detail.body.data).toMatchObject({ productReferenceId: product.body.data.id, referenceGroupIds: [scene.body.data.id] });
    expect(detail.body.data.prompt).toContain('Character "Captain Ines": a sea captain with a red scarf and a brass spyglass');
    expect(detail.body.data.prompt).toContain('Product "Brass lantern"');
    expect(detail.body.data.prompt).toContain('a harbour at night under the stars');
    expect(detail.body.data.prompt).toContain('holding the lantern on the quay');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('finds a character among many through the API (its search), the chosen one staying listed', async () => {
    const many = await stack.createTenant({ rate_limit_per_minute: 10_000 });
    for (let i = 1; i <= 12; i++) {
      const r = await stack.api('/api/characters', {
        key: many.liveKey,
        body: { character_name: `Sailor ${i}`, base_prompt: `a sailor number ${i} on a tall ship` },
      });
      expect(r.status).toBe(200);
    }
    const keeper = await stack.api('/api/characters', {
      key: many.liveKey,
      body: { character_name: 'Lighthouse keeper', base_prompt: 'an old lighthouse keeper with a lantern' },
    });
    expect(keeper.status).toBe(200);
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, many.liveKey, '/studio');
    const characters = page.getByRole('group', { name: /^Characters/ });
    await characters.getByLabel('Sailor 12').waitFor();
    await characters.getByLabel('Find characters').fill('keeper');
    await expect.poll(() => characters.getByRole('checkbox').count()).toBe(1);
    await characters.getByLabel('Lighthouse keeper').check();
    await expectAccessible(page, 'studio-find-character');
    await characters.getByLabel('Find characters').fill('nobody by that name');
    await characters.getByText('No characters match “nobody by that name”.').waitFor();
    // Chosen, it stays listed (and checked) whatever the search shows.
    expect(await characters.getByLabel('Lighthouse keeper').isChecked()).toBe(true);
    await characters.getByLabel('Find characters').fill('');
    await expect.poll(() => characters.getByRole('checkbox').count()).toBe(13);
    expect(await characters.getByLabel('Lighthouse keeper').isChecked()).toBe(true);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('style presets and scenes beyond the first page: "Show more" reads the next one, Find searches them', async () => {
    const many = await stack.createTenant({ rate_limit_per_minute: 10_000 });
    // Created first, the cove is the least recent scene: not on the first page of 100.
    const cove = await stack.api('/api/scenes', {
      key: many.liveKey,
      body: { scene_name: 'Lighthouse cove', scene_prompt: 'a quiet cove' },
    });
    expect(cove.status).toBe(200);
    for (let i = 1; i <= 101; i++) {
      const name = String(i).padStart(3, '0');
      const scene = await stack.api('/api/scenes', {
        key: many.liveKey,
        body: { scene_name: `Harbour ${name}`, scene_prompt: 'a harbour' },
      });
      expect(scene.status).toBe(200);
      const preset = await stack.api('/api/style-presets', { key: many.liveKey, body: { name: `Preset ${name}`, prompt: 'ink' } });
      expect([200, 201]).toContain(preset.status);
    }
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, many.liveKey, '/studio');
    const presets = page.getByLabel('Style preset', { exact: true });
    await presets.waitFor();
    // None and the first 100 by name; the 101st comes with the next page.
    expect(await presets.locator('option').count()).toBe(101);
    await page.getByRole('button', { name: 'Show more style presets (100 shown)' }).click();
    await expect.poll(() => presets.locator('option').count()).toBe(102);
    await expect.poll(() => page.getByRole('button', { name: /Show more style presets/ }).count()).toBe(0);
    await presets.selectOption({ label: 'Preset 101' });
    // Find searches them all through the API (extension: style presets' search), the chosen one kept.
    await page.getByLabel('Find style presets').fill('preset 042');
    await page.getByText('1 found for “preset 042”').waitFor();
    await expect.poll(() => presets.locator('option').count()).toBe(3); // None, the chosen Preset 101, Preset 042
    await page.getByLabel('Find style presets').fill('');
    await expect.poll(() => presets.locator('option').count()).toBe(102);
    expect(await presets.locator('option:checked').textContent()).toBe('Preset 101');

    const scenes = page.getByLabel('Scene', { exact: true });
    expect(await scenes.locator('option', { hasText: 'Lighthouse cove' }).count()).toBe(0);
    await page.getByLabel('Find scenes').fill('cove');
    await page.getByText('1 found for “cove”').waitFor();
    await expect.poll(() => scenes.locator('option').count()).toBe(2);
    await scenes.selectOption({ label: 'Lighthouse cove' });
    await expectAccessible(page, 'studio-find-scene');
    await screenshots(page, 'studio-find-scene');
    await page.getByLabel('Find scenes').fill('nothing like it');
    await page.getByText('No scenes match “nothing like it”').waitFor();
    // Chosen, it stays an option (and chosen) whatever the search shows.
    expect(await scenes.inputValue()).toBe(String(cove.body.data.id));
    await page.getByLabel('Find scenes').fill('');
    await expect.poll(() => scenes.locator('option').count()).toBe(102);
    expect(await scenes.inputValue()).toBe(String(cove.body.data.id));
    expect(errors).toEqual([]);
    await context.close();
  });

  it('a used-up monthly quota is said in words next to the button (402)', async () => {
    const small = await stack.createTenant({ monthly_quota_mb: 1, rate_limit_per_minute: 10_000 });
    // The generation that crosses the quota is still served (usage's rule): 3 pictures of 4K are ~1.4 MB.
    const big = await stack.api('/api/images', {
      key: small.liveKey,
      body: { prompt: 'big pictures', model_id: 'provA-pro-image', resolution_tier: '4k', n: 3 },
    });
    expect(big.status, JSON.stringify(big.body)).toBe(200);
    await waitFor(async () => (await stack.api('/api/profile', { key: small.liveKey })).body?.tenant?.quotas?.monthlyRemainingMb === 0, {
      message: 'the quota used up',
    });
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, small.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    await page.getByLabel('Prompt', { exact: true }).fill('one more please');
    await page.getByRole('button', { name: 'Generate' }).click();
    const form = page.locator('form.studio');
    await form
      .getByRole('alert')
      .filter({
        hasText: "This month's storage quota is used up: delete images to free space, or ask an administrator for a larger quota.",
      })
      .waitFor({ timeout: 60_000 });
    expect(await page.getByRole('region', { name: 'Results' }).count()).toBe(0);
    await expectAccessible(page, 'studio-quota');
    await screenshots(page, 'studio-quota');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('a rate limit is said with the wait (429)', async () => {
    const limited = await stack.createTenant({ rate_limit_per_minute: 20 });
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, limited.liveKey, '/studio');
    await page.getByRole('heading', { name: 'Studio', exact: true }).waitFor();
    await page.getByLabel('Prompt', { exact: true }).fill('a paper boat');
    // The tenant spends its minute elsewhere (the same key from a script), with most of the minute left.
    await waitFor(
      async () => {
        for (let i = 0; i < 25; i++) {
          const r = await stack.api('/api/profile', { key: limited.liveKey });
          if (r.status === 429) return r.body.retryAfter >= 20;
        }
        return false;
      },
      { message: 'the minute spent with 20 s or more of it left', timeout: 90_000, interval: 1000 },
    );
    await page.getByRole('button', { name: 'Generate' }).click();
    const alert = page
      .locator('form.studio')
      .getByRole('alert')
      .filter({ hasText: /^Too many requests: try again in \d+ seconds\./ });
    await alert.waitFor();
    const wait = Number((await alert.textContent())?.match(/in (\d+) seconds/)?.[1]);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(60);
    expect(await page.getByRole('region', { name: 'Progress' }).count()).toBe(0);
    await expectAccessible(page, 'studio-rate-limited');
    expect(errors.filter((e) => !/status of 429/.test(e))).toEqual([]);
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
