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
} from '../support/browser.js';
import type { TestStack, TestTenant } from '../support/stack.js';
import { noisePng, startImageServer } from './usage-support.js';

/**
 * The console's saved assets pages (issue 38 item 5) in headless Chromium through the real stack: a character is
 * created from images picked in the gallery, edited, found by its name and generated from (the result shown in
 * place, its prompt the character's, the picked images sent to the provider as its references, and in the gallery);
 * a product is created from its URL and generated from (every image of the request shown); scenes and style
 * presets are created, edited and deleted; another tenant sees none of it. axe-core and screenshots of each page.
 */

let stack: TestStack;
let ui: ConsoleBrowser;
let tenant: TestTenant;
let other: TestTenant;
let images: Awaited<ReturnType<typeof startImageServer>>;
const gallery: number[] = [];

beforeAll(async () => {
  [stack, ui, images] = await Promise.all([startConsoleStack(), launchConsoleBrowser(), startImageServer()]);
  [tenant, other] = await Promise.all([stack.createTenant({ rate_limit_per_minute: 10_000 }), stack.createTenant()]);
  for (const prompt of ['a red fox in the snow', 'a lighthouse at dusk']) {
    const r = await stack.api('/api/images', { key: tenant.liveKey, body: { prompt, n: 1 } });
    expect(r.status).toBe(200);
    gallery.push(r.body.data.images[0].record_id);
  }
}, 60_000);
afterAll(async () => {
  await ui?.close();
  await stack?.stop();
  await images?.stop();
});

/** Signs in, then opens `path` (the sign-in lands on the overview; the page is opened on its own). */
async function signInAt(page: Page, path: string) {
  await signInTenant(page, stack, tenant.liveKey);
  await openConsole(page, stack, path);
}

/** The sandbox provider's requests (what reached the provider): the last id, and those after one. */
async function sandboxLastId(): Promise<number> {
  return (await (await fetch(`${stack.sandboxUrl}/_sandbox/requests?limit=1`)).json()).lastId;
}
async function sandboxRequestsSince(since: number): Promise<{ prompt: string; imageInputs: number }[]> {
  return (await (await fetch(`${stack.sandboxUrl}/_sandbox/requests?since=${since}`)).json()).requests;
}

describe('console saved assets', () => {
  it('creates a character from gallery images, edits and finds it, generates from it; deletes it', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInAt(page, '/assets');
    await page.getByRole('heading', { name: 'Saved assets' }).waitFor();
    await expect.poll(() => page.title()).toBe('Characters · Saved assets · imagegen console');
    await page.getByText('No characters yet.').waitFor();

    await page.getByRole('button', { name: 'New character' }).click();
    const dialog = page.getByRole('dialog', { name: 'New character' });
    await dialog.getByLabel('Name').fill('Captain Vera');
    // A base prompt that is too short: the API's words next to the field, nothing created.
    await dialog.getByLabel('Base prompt').fill('short');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await expect.poll(() => dialog.locator('.field-error').first().textContent()).toMatch(/Base prompt must be between 10 and 2000/);

    await dialog.getByLabel('Base prompt').fill('a weathered sea captain with a silver beard and a blue coat');
    await dialog.getByRole('button', { name: 'Choose from gallery…' }).click();
    const picker = page.getByRole('dialog', { name: 'Choose images from the gallery' });
    await picker.locator('img').nth(1).waitFor();
    await expectAccessible(page, 'assets image picker');
    await screenshots(page, 'assets-image-picker');
    await picker.getByRole('checkbox').nth(0).check();
    await picker.getByRole('checkbox').nth(1).check();
    await picker.getByRole('button', { name: 'Use 2 images' }).click();
    await expect.poll(() => dialog.getByRole('button', { name: /^Remove image/ }).count()).toBe(2);
    await dialog.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('cell', { name: 'Captain Vera', exact: true }).waitFor();

    const listed = await stack.api('/api/characters/Captain%20Vera', { key: tenant.liveKey });
    expect(listed.status).toBe(200);
    expect(listed.body.data.reference_images.map((i: { id: number }) => i.id).sort()).toEqual([...gallery].sort());
    // Another tenant does not see it.
    expect((await stack.api(`/api/characters/${listed.body.data.id}`, { key: other.liveKey })).status).toBe(404);

    await expectAccessible(page, 'assets characters');
    await screenshots(page, 'assets-characters');

    // Edit: the form comes back filled (its images too); a new description is saved.
    await page.getByRole('button', { name: 'Edit Captain Vera' }).click();
    const edit = page.getByRole('dialog', { name: 'Edit character' });
    await expect.poll(() => edit.getByLabel('Name').inputValue()).toBe('Captain Vera');
    await expect.poll(() => edit.getByRole('button', { name: /^Remove image/ }).count()).toBe(2);
    await edit.getByLabel('Description').fill('Commands the Northern Star');
    await edit.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('cell', { name: 'Commands the Northern Star', exact: true }).waitFor();

    // Search: by name (the query in the URL, so a reload keeps it).
    await page.getByLabel('Search characters').fill('nobody');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByText('Nothing matches.').waitFor();
    expect(page.url()).toContain('q=nobody');
    await page.getByLabel('Search characters').fill('Vera');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('cell', { name: 'Captain Vera', exact: true }).waitFor();

    // Generate from the character: the result appears in the dialog and is the character's.
    await page.getByRole('button', { name: 'Generate from Captain Vera' }).click();
    const gen = page.getByRole('dialog', { name: 'Generate from Captain Vera' });
    await gen.getByLabel('Scene').fill('standing at the helm in a storm');
    const since = await sandboxLastId();
    await gen.getByRole('button', { name: 'Generate' }).click();
    const result = gen.getByRole('link', { name: /in the gallery/ });
    await result.waitFor();
    const imageId = Number((await result.getAttribute('aria-label'))?.match(/Image (\d+)/)?.[1]);
    // The result is shown in place (its picture loaded), and it is the character's: its prompt, and the two gallery
    // images picked above sent to the provider as its references.
    await expect
      .poll(() => result.locator('img').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0), { timeout: 30_000 })
      .toBe(true);
    const made = await stack.api(`/api/images/${imageId}`, { key: tenant.liveKey });
    expect(made.status).toBe(200);
    expect(made.body.data.prompt).toContain('standing at the helm in a storm');
    expect(made.body.data.prompt).toContain('Character "Captain Vera": a weathered sea captain with a silver beard and a blue coat');
    const sent = await sandboxRequestsSince(since);
    expect(sent).toHaveLength(1);
    expect(sent[0].imageInputs).toBe(2);
    await expectAccessible(page, 'assets generate');
    await screenshots(page, 'assets-generate');
    await gen.getByRole('button', { name: 'Close' }).click();

    // Delete after a confirmation.
    await page.getByRole('button', { name: 'Delete Captain Vera' }).click();
    await page.getByRole('dialog', { name: 'Delete Captain Vera?' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByText('Nothing matches.').waitFor();
    expect((await stack.api('/api/characters/Captain%20Vera', { key: tenant.liveKey })).status).toBe(404);
    // The image generated from it stays, in the gallery.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Gallery' }).click();
    await page.locator(`a[href="/console/images/${imageId}"]`).first().waitFor();
    expect(errors).toEqual([]);
    await context.close();
  }, 150_000);

  it('creates a product from its URL and generates from it; scenes and style presets: create, edit, delete', async () => {
    const { context, page, errors } = await ui.newPage();
    await signInAt(page, '/assets');
    await page.getByRole('heading', { name: 'Saved assets' }).waitFor();
    await page.getByRole('navigation', { name: 'Asset kinds' }).getByRole('link', { name: 'Products' }).click();
    await page.getByRole('heading', { name: 'Products' }).waitFor();
    await page.getByRole('button', { name: 'New product' }).click();
    const dialog = page.getByRole('dialog', { name: 'New product' });
    await dialog.getByLabel('Name').fill('Glass bottle');
    await dialog.getByLabel('Product image URL').fill(images.serve(noisePng(64, 64)));
    await dialog.getByLabel('Tags').fill('glass, bottle');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('cell', { name: 'Glass bottle', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Generate from Glass bottle' }).click();
    const gen = page.getByRole('dialog', { name: 'Generate from Glass bottle' });
    await gen.getByLabel('Scene').fill('on a marble kitchen counter');
    await gen.getByLabel('Number of images').fill('2');
    await gen.getByRole('button', { name: 'Generate' }).click();
    // Both images of the request are shown, each the product's.
    // A generation of two images: it may take longer than the poll's default second on a busy machine.
    await expect.poll(() => gen.getByRole('link', { name: /in the gallery/ }).count(), { timeout: 60_000 }).toBe(2);
    const products = await stack.api('/api/products', { key: tenant.liveKey });
    const bottle = products.body.data.find((p: { productName: string }) => p.productName === 'Glass bottle');
    for (const link of await gen.getByRole('link', { name: /in the gallery/ }).all()) {
      const id = (await link.getAttribute('aria-label'))?.match(/Image (\d+)/)?.[1];
      const made = await stack.api(`/api/images/${id}`, { key: tenant.liveKey });
      expect(made.body.data.productReferenceId).toBe(bottle.id);
      expect(made.body.data.prompt).toContain('Product "Glass bottle"');
    }
    await gen.getByRole('button', { name: 'Close' }).click();
    await expectAccessible(page, 'assets products');
    await screenshots(page, 'assets-products');

    // Scenes: with a reference image from the gallery, renamed, deleted.
    await page.getByRole('link', { name: 'Scenes' }).click();
    await page.getByRole('heading', { name: 'Scenes' }).waitFor();
    await page.getByRole('button', { name: 'New scene' }).click();
    const scene = page.getByRole('dialog', { name: 'New scene' });
    await scene.getByLabel('Name').fill('Harbour at dawn');
    await scene.getByLabel('Scene prompt').fill('a quiet harbour at dawn, soft mist');
    await scene.getByRole('button', { name: 'Choose from gallery…' }).click();
    const picker = page.getByRole('dialog', { name: 'Choose images from the gallery' });
    await picker.getByRole('checkbox').first().check();
    await picker.getByRole('button', { name: 'Use 1 image' }).click();
    await scene.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('cell', { name: 'Harbour at dawn', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Edit Harbour at dawn' }).click();
    const sceneEdit = page.getByRole('dialog', { name: 'Edit scene' });
    await expect.poll(() => sceneEdit.getByLabel('Name').inputValue()).toBe('Harbour at dawn');
    await sceneEdit.getByLabel('Name').fill('Harbour at noon');
    await sceneEdit.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('cell', { name: 'Harbour at noon', exact: true }).waitFor();
    await expectAccessible(page, 'assets scenes');
    await screenshots(page, 'assets-scenes');
    await page.getByRole('button', { name: 'Delete Harbour at noon' }).click();
    await page.getByRole('dialog', { name: 'Delete Harbour at noon?' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No scenes yet.').waitFor();

    // Style presets: a duplicate name is refused in words; search filters the list.
    await page.getByRole('link', { name: 'Style presets' }).click();
    await page.getByRole('heading', { name: 'Style presets' }).waitFor();
    for (const name of ['Noir', 'Noir']) {
      await page.getByRole('button', { name: 'New style preset' }).click();
      const d = page.getByRole('dialog', { name: 'New style preset' });
      await d.getByLabel('Name').fill(name);
      await d.getByLabel('Prompt', { exact: true }).fill('black and white, high contrast');
      await d.getByLabel('Preferred aspect ratio').selectOption('16:9');
      await d.getByRole('button', { name: 'Create' }).click();
      if ((await page.getByRole('cell', { name: 'Noir', exact: true }).count()) === 0)
        await page.getByRole('cell', { name: 'Noir', exact: true }).waitFor();
    }
    const dup = page.getByRole('dialog', { name: 'New style preset' });
    await expect
      .poll(() => dup.getByRole('alert').allTextContents())
      .toEqual(expect.arrayContaining([expect.stringMatching(/already exists/i)]));
    await dup.getByRole('button', { name: 'Close' }).click();
    const presets = await stack.api('/api/style-presets', { key: tenant.liveKey });
    expect(presets.body.data.map((p: { name: string; aspect_ratio: string }) => [p.name, p.aspect_ratio])).toEqual([['Noir', '16:9']]);
    await expectAccessible(page, 'assets style presets');
    await screenshots(page, 'assets-style-presets');
    expect(errors).toEqual([]);
    await context.close();
  }, 150_000);

  it('lists 100 at a time ("Show more" goes on from the cursor); style presets are searched by the API, prompt too', async () => {
    const many = await stack.createTenant({ rate_limit_per_minute: 10_000 });
    for (let i = 1; i <= 102; i++) {
      const r = await stack.api('/api/style-presets', {
        key: many.liveKey,
        body: { name: `Style ${String(i).padStart(3, '0')}`, prompt: 'plain' },
      });
      expect(r.status).toBe(200);
    }
    expect((await stack.api('/api/style-presets', { key: many.liveKey, body: { name: 'Zebra', prompt: 'sumi ink wash' } })).status).toBe(
      200,
    );
    const { context, page, errors } = await ui.newPage();
    await signInTenant(page, stack, many.liveKey);
    await openConsole(page, stack, '/assets/style-presets');
    const table = page.getByRole('table', { name: 'Style presets' });
    await table.getByRole('cell', { name: 'Style 001', exact: true }).waitFor();
    expect(await table.locator('tbody tr').count()).toBe(100);
    expect(await page.getByTestId('assets-shown').textContent()).toBe('100 of 103 shown');
    await page.getByRole('button', { name: 'Show more style presets' }).click();
    await table.getByRole('cell', { name: 'Zebra', exact: true }).waitFor();
    expect(await table.locator('tbody tr').count()).toBe(103);
    expect(await page.getByRole('button', { name: 'Show more style presets' }).count()).toBe(0);
    // The API's search: "sumi" is only in Zebra's prompt.
    await page.getByLabel('Search style presets').fill('sumi');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('table', { name: 'Style presets matching “sumi”' }).getByRole('cell', { name: 'Zebra', exact: true }).waitFor();
    await expect
      .poll(() => page.getByRole('table', { name: 'Style presets matching “sumi”' }).locator('tbody tr').count(), { timeout: 30_000 })
      .toBe(1);
    await expectAccessible(page, 'assets style presets search');
    expect(errors).toEqual([]);
    await context.close();
  }, 150_000);
});
