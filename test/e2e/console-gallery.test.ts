import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsoleBrowser,
  expectAccessible,
  launchConsoleBrowser,
  openConsole,
  screenshots,
  signInTenant,
  startConsoleStack,
  WIDTHS,
} from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';
import { readZip } from '../support/zip.js';
import { librarySeeder } from './images-seed.js';

/**
 * The console's gallery (issue 38 item 3) in headless Chromium through the real stack: thumbnails newest first,
 * lazy with their size known; the SPEC 4.1 filters live in the URL query; cursor paging appends ("Load more");
 * saved searches (SPEC 4.6) saved, applied and deleted; tiles selected for a bulk delete (one image failing) and a
 * ZIP download. axe-core and screenshots at 1280 and 390 px.
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
    await expect.poll(() => page.title()).toBe('Gallery · imagegen console');
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
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await grid.getByRole('link').first().waitFor();

    // A size range no image falls in.
    await page.getByLabel('Min size (bytes)').fill('10');
    await page.getByLabel('Max size (bytes)').fill('20');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No images match these filters.').waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });

  it('on a phone the filters start folded (the first images in view), open from the keyboard, and stay open once applied', async () => {
    const { context, page, errors } = await ui.newPage();
    await page.setViewportSize(WIDTHS.phone);
    await signInTenant(page, stack, tenant.liveKey, '/gallery');
    const panel = page.locator('details.gallery-filter-panel');
    await page.getByRole('list', { name: 'Images, newest first' }).getByRole('listitem').first().waitFor();
    expect(await panel.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await page.getByLabel('Search prompts').isVisible()).toBe(false);
    const firstTile = await page.getByRole('list', { name: 'Images, newest first' }).getByRole('listitem').first().boundingBox();
    expect(firstTile?.y ?? Number.POSITIVE_INFINITY).toBeLessThan(WIDTHS.phone.height);
    await expectAccessible(page, 'gallery-phone-folded');
    await screenshots(page, 'gallery-phone-folded');
    await page.getByText('Filters and saved searches').focus();
    await page.keyboard.press('Enter');
    await page.getByLabel('Search prompts').fill('harbour');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('Filters and saved searches (1 applied)').waitFor();
    await page.reload();
    await page.getByText('Filters and saved searches (1 applied)').waitFor();
    expect(await panel.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true);
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
  it('keeps at most 8 pages in the grid: scrolling on drops the earliest, "Show earlier images" brings them back', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, tenant.liveKey);
    // Pages of 1: the 12 images are 12 pages, 4 more than the grid keeps.
    await openConsole(page, stack, '/gallery?limit=1');
    const grid = page.getByRole('list', { name: 'Images, newest first' });
    await grid.getByRole('link').first().waitFor();
    const hrefs = () => grid.getByRole('link').evaluateAll((els) => els.map((e) => e.getAttribute('href')));
    const all = (await newestFirst()).map((id) => `/console/images/${id}`);
    for (let i = 0; i < 30 && (await page.getByRole('button', { name: 'Load more' }).count()) > 0; i++) {
      await page
        .getByRole('button', { name: 'Load more' })
        .click({ timeout: 2000 })
        .catch(() => {});
      await page.waitForTimeout(100);
    }
    await expect.poll(hrefs).toEqual(all.slice(4));
    await page.getByText('8 shown of 12').waitFor();
    expect(await page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
    // Back up, one page at a time: the window slides, dropping from the end, until the newest is first again.
    for (let back = 1; back <= 4; back++) {
      await page.getByRole('button', { name: 'Show earlier images' }).click();
      await expect.poll(hrefs).toEqual(all.slice(4 - back, 12 - back));
    }
    expect(await page.getByRole('button', { name: 'Show earlier images' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Load more' }).waitFor();
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
    await expect.poll(() => page.title()).toBe(`Image ${id} · imagegen console`);
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
    const ask = page.getByRole('dialog', { name: `Delete image ${editedId}?` });
    await ask.waitFor();
    // The safe choice has the focus.
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    await ask.getByRole('button', { name: 'Delete for good' }).click();
    await page.getByRole('heading', { name: 'Gallery' }).waitFor();
    expect((await stack.api(`/api/images/${editedId}`, { key: tenant.liveKey })).status).toBe(404);
    // An unknown image is said in words.
    await openConsole(page, stack, '/images/999999');
    await page.getByRole('alert').first().waitFor();
    expect(errors.filter((e) => !e.includes('404'))).toEqual([]);
    await context.close();
  });
});

describe('console gallery: saved searches, selection, bulk delete and ZIP download', () => {
  // A tenant of its own (these tests delete images): 24 seeded images, 4 of them wide lighthouses.
  let other: TestTenant;
  const ids: number[] = [];
  beforeAll(async () => {
    other = await stack.createTenant({ rate_limit_per_minute: 10_000 });
    const seed = librarySeeder(stack);
    try {
      for (let i = 0; i < 24; i++) {
        const wide = i % 6 === 0;
        const im = await seed.store(other.tenantId, {
          prompt: wide ? `a lighthouse on a wide coast ${i}` : `a small teapot ${i}`,
          aspectRatio: wide ? '16:9' : '1:1',
          width: wide ? 96 : 64,
          height: wide ? 54 : 64,
          color: `#${(0x203040 + i * 0x050403).toString(16).slice(-6)}`,
        });
        ids.push(im.id);
      }
    } finally {
      seed.close();
    }
  }, 120_000);

  const grid = (page: Page) => page.getByRole('list', { name: 'Images, newest first' });
  const checkbox = (page: Page, id: number) => page.getByRole('checkbox', { name: `Select image ${id}` });

  it('finds images with filters and a saved search: saved (the API words a bad name), applied, deleted after a confirmation', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, other.liveKey);
    await openConsole(page, stack, '/gallery');
    await page.getByText('24 shown of 24').waitFor();
    expect(await page.getByLabel('Saved search', { exact: true }).locator('option').allTextContents()).toEqual(['None saved yet']);

    // Filters: prompt search and the 16:9 ratio find the four wide lighthouses.
    await page.getByLabel('Search prompts').fill('lighthouse');
    await page.getByLabel('Aspect ratio').selectOption('16:9');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('4 shown of 4').waitFor();

    // Saving without a name: the API's 400 is shown next to the name field.
    await page.getByRole('button', { name: 'Save current filters' }).click();
    const nameField = page.getByLabel('Name of the saved search');
    await expect.poll(() => page.locator('.saved-searches .field-error').textContent()).toBe('presetName cannot be empty');
    expect(await nameField.getAttribute('aria-invalid')).toBe('true');
    await nameField.fill('Wide lighthouses');
    await page.getByRole('button', { name: 'Save current filters' }).click();
    await expect
      .poll(() => page.getByLabel('Saved search', { exact: true }).locator('option:checked').textContent())
      .toBe('Wide lighthouses');
    const saved = await stack.api('/api/search-presets', { key: other.liveKey });
    expect(saved.body.data).toHaveLength(1);
    expect(saved.body.data[0]).toMatchObject({ presetName: 'Wide lighthouses', filters: { search: 'lighthouse', aspectRatio: '16:9' } });
    // The same name again: the API refuses it, said next to the field.
    await nameField.fill('Wide lighthouses');
    await page.getByRole('button', { name: 'Save current filters' }).click();
    await expect.poll(() => page.locator('.saved-searches .field-error').textContent()).toMatch(/Wide lighthouses/);

    // A filter a saved search cannot keep is named before saving.
    await page.getByLabel('Model').selectOption('provA-flash-lite-image');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('Not kept in a saved search: Model.').waitFor();

    // Cleared, then the saved search applied: its filters are the URL's again.
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await page.getByText('24 shown of 24').waitFor();
    await page.getByLabel('Saved search', { exact: true }).selectOption({ label: 'Wide lighthouses' });
    await page.getByRole('button', { name: 'Apply saved search' }).click();
    await page.getByText('4 shown of 4').waitFor();
    const url = new URL(page.url());
    expect(url.searchParams.get('search')).toBe('lighthouse');
    expect(url.searchParams.get('aspectRatio')).toBe('16:9');
    expect(url.searchParams.get('modelId')).toBeNull();
    expect(await page.getByLabel('Search prompts').inputValue()).toBe('lighthouse');
    await expectAccessible(page, 'gallery-saved-search');
    await screenshots(page, 'gallery-saved-search');

    // Delete it: a modal dialog asks first (Cancel focused); confirmed, the list is empty.
    const remove = page.getByRole('button', { name: 'Delete saved search' });
    await remove.click();
    const ask = page.getByRole('dialog', { name: 'Delete the saved search Wide lighthouses?' });
    await ask.waitFor();
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    await expectAccessible(page, 'gallery-saved-search-delete');
    await screenshots(page, 'gallery-saved-search-delete');
    await ask.getByRole('button', { name: 'Delete' }).click();
    await ask.waitFor({ state: 'detached' });
    await expect
      .poll(() => page.getByLabel('Saved search', { exact: true }).locator('option').allTextContents())
      .toEqual(['None saved yet']);
    expect((await stack.api('/api/search-presets', { key: other.liveKey })).body.data).toEqual([]);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('selects images and bulk deletes them: one already gone is reported with its reason and stays selected', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, other.liveKey);
    await openConsole(page, stack, '/gallery');
    await page.getByText('24 shown of 24').waitFor();
    const [a, b, c] = [ids[23], ids[22], ids[21]];
    for (const id of [a, b, c]) await checkbox(page, id).check();
    await page.getByText('3 selected').waitFor();
    expect(await grid(page).locator('.tile-selected').count()).toBe(3);
    // b is deleted elsewhere (the API) after the page showed it: the bulk call reports it as failed.
    expect((await stack.api(`/api/images/${b}`, { method: 'DELETE', key: other.liveKey })).status).toBe(204);

    const del = page.getByRole('button', { name: 'Delete selected' });
    await del.click();
    const ask = page.getByRole('dialog', { name: 'Delete 3 images?' });
    await ask.waitFor();
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Cancel');
    await expectAccessible(page, 'gallery-bulk-delete-confirm');
    await screenshots(page, 'gallery-bulk-delete-confirm');
    // Escape cancels: nothing deleted, focus back on the button.
    await page.keyboard.press('Escape');
    await ask.waitFor({ state: 'detached' });
    expect(await del.evaluate((el) => el === document.activeElement)).toBe(true);
    expect((await stack.api(`/api/images/${a}`, { key: other.liveKey })).status).toBe(200);
    await del.click();
    await ask.getByRole('button', { name: 'Delete 3' }).click();

    const outcome = page.getByRole('alert').filter({ hasText: 'Deleted 2 of 3 images.' });
    await outcome.waitFor();
    expect(await outcome.getByRole('list', { name: 'Images not deleted' }).getByRole('listitem').allTextContents()).toEqual([
      `Image ${b}: Image not found`,
    ]);
    // The deleted tiles are gone; the failed one is still shown and selected.
    await expect.poll(() => grid(page).getByRole('listitem').count()).toBe(22);
    expect(await page.getByRole('link', { name: new RegExp(`^Image ${a}:`) }).count()).toBe(0);
    expect(await page.getByRole('link', { name: new RegExp(`^Image ${c}:`) }).count()).toBe(0);
    expect(await checkbox(page, b).isChecked()).toBe(true);
    await page.getByText('1 selected').waitFor();
    for (const id of [a, c]) expect((await stack.api(`/api/images/${id}`, { key: other.liveKey })).status).toBe(404);
    await expectAccessible(page, 'gallery-bulk-delete-outcome');
    await screenshots(page, 'gallery-bulk-delete-outcome');

    // More than 20 selected: said plainly, and delete is not offered; clearing the selection empties it.
    await page.getByRole('button', { name: 'Select all shown' }).click();
    await page.getByText('22 selected').waitFor();
    await page.getByText('Delete takes at most 20 images at a time: 22 are selected.', { exact: false }).waitFor();
    expect(await del.isDisabled()).toBe(true);
    expect(await del.getAttribute('aria-describedby')).toBe('too-many-to-delete');
    await expectAccessible(page, 'gallery-selection');
    await screenshots(page, 'gallery-selection');
    await page.getByRole('button', { name: 'Clear selection' }).click();
    await page.getByText('No image selected').waitFor();
    expect(await grid(page).locator('.tile-selected').count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('downloads the selected images as a ZIP, and says in words when one is missing', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, other.liveKey);
    await openConsole(page, stack, '/gallery?search=lighthouse');
    await page.getByText('4 shown of 4').waitFor();
    const wide = (
      await grid(page)
        .getByRole('link')
        .evaluateAll((els) => els.map((e) => e.getAttribute('href')))
    ).map((h) => Number(h?.split('/').pop()));
    const [x, y, z] = wide;
    await checkbox(page, x).check();
    await checkbox(page, y).check();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download ZIP' }).click()]);
    expect(download.suggestedFilename()).toBe('images.zip');
    const zip = readFileSync(await download.path());
    expect(zip.subarray(0, 4).toString('latin1')).toBe('PK\u0003\u0004');
    const entries = readZip(zip);
    expect([...entries.keys()].sort()).toEqual([`image-${x}.png`, `image-${y}.png`].sort());
    // Each entry is the image's original, byte for byte.
    for (const id of [x, y]) {
      const detail = await stack.api(`/api/images/${id}`, { key: other.liveKey });
      const original = Buffer.from(await (await fetch(new URL(detail.body.data.fullUrl, stack.baseUrl))).arrayBuffer());
      expect(entries.get(`image-${id}.png`)?.equals(original), `image ${id}`).toBe(true);
    }

    // One of the selection deleted meanwhile: the ZIP is refused and the page says which image is missing.
    expect((await stack.api(`/api/images/${z}`, { method: 'DELETE', key: other.liveKey })).status).toBe(204);
    await checkbox(page, z).check();
    await page.getByRole('button', { name: 'Download ZIP' }).click();
    const banner = page.getByRole('region', { name: 'Selection' }).getByRole('alert');
    await banner.getByText('Image not found').waitFor();
    expect(await banner.textContent()).toContain(`missing_ids: ${z}`);
    expect(errors).toEqual([]);
    await context.close();
  });
});
