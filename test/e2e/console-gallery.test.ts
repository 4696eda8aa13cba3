import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsoleBrowser,
  expectAccessible,
  launchConsoleBrowser,
  openConsole,
  screenshots,
  signInTenant,
  startConsoleStack,
} from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';

/**
 * The console's gallery (issue 38 item 3) in headless Chromium through the real stack: thumbnails newest first,
 * lazy with their size known; the SPEC 4.1 filters live in the URL query; cursor paging appends ("Load more").
 * axe-core and screenshots at 1280 and 390 px.
 */

let stack: TestStack;
let ui: ConsoleBrowser;
let tenant: TestTenant;
const seeded: number[] = [];

beforeAll(async () => {
  [stack, ui] = await Promise.all([startConsoleStack(), launchConsoleBrowser()]);
  tenant = await stack.createTenant({ rate_limit_per_minute: 10_000 });
  for (const prompt of ['a red fox in the snow', 'a lighthouse at dusk', 'a quiet harbour at dawn']) {
    const r = await stack.api('/api/images', { key: tenant.liveKey, body: { prompt, n: 4 } });
    expect(r.status).toBe(200);
    for (const im of r.body.data.images) seeded.push(im.record_id);
  }
}, 120_000);
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
});

/** The tenant's image ids in the API's order (newest first). */
async function newestFirst(): Promise<number[]> {
  const r = await stack.api('/api/images?limit=100', { key: tenant.liveKey });
  return r.body.data.map((im: { id: number }) => im.id);
}

describe('console gallery', () => {
  it('shows the images newest first, filters them through the URL query and appends pages', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, tenant.liveKey);
    await openConsole(page, stack, '/gallery');
    await page.getByRole('heading', { name: 'Gallery' }).waitFor();
    expect(await page.title()).toBe('Gallery · imagegen console');
    const grid = page.getByRole('list', { name: 'Images, newest first' });
    await grid.getByRole('link').first().waitFor();
    expect(await grid.getByRole('listitem').count()).toBe(12);
    // Newest first: the API's order, and the last batch seeded comes first.
    const order = await newestFirst();
    expect(await grid.getByRole('link').evaluateAll((els) => els.map((e) => e.getAttribute('href')))).toEqual(
      order.map((id) => `/console/images/${id}`),
    );
    expect(seeded.slice(8)).toContain(order[0]);
    // Every thumbnail is lazy with its width and height known.
    const imgs = await grid
      .locator('img')
      .evaluateAll((els) =>
        els.map((e) => ({ loading: e.getAttribute('loading'), w: e.getAttribute('width'), h: e.getAttribute('height') })),
      );
    for (const im of imgs) {
      expect(im.loading).toBe('lazy');
      expect(Number(im.w)).toBeGreaterThan(0);
      expect(Number(im.h)).toBeGreaterThan(0);
    }
    await expectAccessible(page, 'gallery');
    await screenshots(page, 'gallery');

    // A filter: search with the "any word" mode; its values land in the URL query.
    await page.getByLabel('Search prompts').fill('lighthouse nothing');
    await page.getByLabel('Search mode').selectOption('any');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/searchMode=any/);
    expect(new URL(page.url()).searchParams.get('search')).toBe('lighthouse nothing');
    await page.getByText('4 shown of 4').waitFor();
    // Exact phrase (the default) of the same words finds nothing.
    await page.getByLabel('Search mode').selectOption('exact');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No images match these filters.').waitFor();
    // A reload keeps the filters (they live in the URL).
    await page.reload();
    await page.getByText('No images match these filters.').waitFor();
    expect(await page.getByLabel('Search prompts').inputValue()).toBe('lighthouse nothing');
    await page.getByRole('button', { name: 'Clear' }).click();
    await grid.getByRole('link').first().waitFor();

    // A size range no image falls in.
    await page.getByLabel('Min size (bytes)').fill('10');
    await page.getByLabel('Max size (bytes)').fill('20');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No images match these filters.').waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });

  it('pages by cursor: "Load more" appends the next page', async () => {
    const { context, page, errors } = await ui.newPage();
    await page.setViewportSize({ width: 1280, height: 600 });
    await signInTenant(page, stack, tenant.liveKey);
    await openConsole(page, stack, '/gallery?limit=5');
    await page.getByRole('heading', { name: 'Gallery' }).waitFor();
    const grid = page.getByRole('list', { name: 'Images, newest first' });
    await grid.getByRole('link').first().waitFor();
    // Pages of 5 are appended (the button, or the sentinel coming into view) until the last one: 12, no repeat.
    for (let i = 0; i < 5 && (await page.getByRole('button', { name: 'Load more' }).count()) > 0; i++) {
      await page
        .getByRole('button', { name: 'Load more' })
        .click({ timeout: 2000 })
        .catch(() => {});
      await page.waitForTimeout(200);
    }
    await page.getByText('12 shown of 12').waitFor();
    expect(await page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
    const hrefs = await grid.getByRole('link').evaluateAll((els) => els.map((e) => e.getAttribute('href')));
    expect(new Set(hrefs).size).toBe(12);
    expect(hrefs).toEqual((await newestFirst()).map((id) => `/console/images/${id}`));
    expect(errors).toEqual([]);
    await context.close();
  });
  it('opens an image: every field, edit with a prompt, the chain both ways, download, delete', async () => {
    const { context, page, errors } = await ui.newPage();
    page.setDefaultTimeout(15_000);
    await signInTenant(page, stack, tenant.liveKey);
    const id = seeded[0];
    await openConsole(page, stack, `/images/${id}`);
    await page.getByRole('heading', { name: `Image ${id}` }).waitFor();
    expect(await page.title()).toBe(`Image ${id} · imagegen console`);
    for (const label of [
      'Prompt',
      'Negative prompt',
      'Operation',
      'Model',
      'Aspect ratio',
      'Resolution tier',
      'Format',
      'Session',
      'Created',
    ]) {
      await page.locator('dt', { hasText: new RegExp(`^${label}$`) }).waitFor();
    }
    const full = page.locator('img.image-full');
    expect(Number(await full.getAttribute('width'))).toBeGreaterThan(0);
    await page.getByText('This is an original image.').waitFor();
    const download = page.getByRole('link', { name: 'Download' });
    expect(await download.getAttribute('download')).toMatch(new RegExp(`^image-${id}\\.`));

    // Edit with a prompt: the result is linked and appears in the chain of edits.
    await page.getByLabel('Edit prompt').fill('make it snow harder');
    await page.getByRole('button', { name: 'Edit image' }).click();
    const result = page.getByRole('link', { name: /Open the edited image \d+/ });
    await result.waitFor({ timeout: 30_000 });
    const editedId = Number((await result.getAttribute('href'))?.split('/').pop());
    expect(editedId).toBeGreaterThan(id);
    await page
      .getByRole('region', { name: 'Edits of this image' })
      .getByRole('link', { name: new RegExp(`^Image ${editedId} \\(`) })
      .waitFor();
    await expectAccessible(page, 'image');
    await screenshots(page, 'image');

    // The edit's page shows its parent in the chain; the parent link goes back.
    await result.click();
    await page.getByRole('heading', { name: `Image ${editedId}` }).waitFor();
    await page
      .getByRole('region', { name: 'Edited from' })
      .getByRole('link', { name: new RegExp(`^Image ${id} `) })
      .waitFor();
    await page.getByRole('link', { name: `#${id}` }).click();
    await page.getByRole('heading', { name: `Image ${id}` }).waitFor();

    // Delete the edit after the confirmation: back to the gallery, and the API no longer has it.
    await openConsole(page, stack, `/images/${editedId}`);
    await page.getByRole('button', { name: 'Delete' }).click();
    await page
      .getByRole('dialog', { name: `Delete image ${editedId}?` })
      .getByRole('button', { name: 'Delete for good' })
      .click();
    await page.getByRole('heading', { name: 'Gallery' }).waitFor();
    expect((await stack.api(`/api/images/${editedId}`, { key: tenant.liveKey })).status).toBe(404);
    // An unknown image is said in words.
    await openConsole(page, stack, '/images/999999');
    await page.getByRole('alert').first().waitFor();
    expect(errors.filter((e) => !e.includes('404'))).toEqual([]);
    await context.close();
  });
});
