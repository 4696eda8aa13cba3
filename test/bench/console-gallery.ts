import { linkSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { launchConsoleBrowser, signInTenant, startConsoleStack, WIDTHS } from '../support/browser.js';
import { seedScale } from './scale-seed.js';
import { fmt, machineLoad, median } from './util.js';

/**
 * Issue 38's figure: the time to the first gallery paint with 10,000 images (goal under 1 s). A tenant gets 10,000
 * image rows (scale-seed.ts: one INSERT ... SELECT generate_series), each with a thumbnail file (hard links to
 * the thumbnails of 4 images the sandbox generated, so every tile's <img> loads a real WebP). Chromium (headless,
 * /usr/bin/chromium) signs in once; each run is a fresh browser context (empty cache, the session cookie only)
 * opening /console/gallery at 1280x800 and timing, from navigation start:
 *   - first thumbnail: the render time of the grid's first painted <img> (Element Timing: an init script marks
 *     the grid's images with elementtiming as they are inserted, before they paint);
 *   - FCP (first-contentful-paint) and the first page's GET /api/images (its responseEnd);
 * and counting what the page loaded: tiles in the grid, thumbnails fetched, GET /api/images calls; then once more
 * after scrolling to the end of the page once (the next page appends; 10,000 are never loaded).
 * BENCH_RUNS (7) runs after one warm-up; the median and every run are printed.
 */
export async function benchConsoleGallery(): Promise<void> {
  const runs = Number(process.env.BENCH_RUNS ?? 7);
  const count = Number(process.env.BENCH_GALLERY_IMAGES ?? 10_000);
  const stack = await startConsoleStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  const ui = await launchConsoleBrowser();
  try {
    const tenant = await stack.createTenant();
    // Four real thumbnails, as the sandbox makes them.
    const made = await stack.api('/api/images', { key: tenant.liveKey, body: { prompt: 'a thumbnail to copy', n: 4 } });
    if (made.status !== 200) throw new Error(`generate: ${made.status} ${JSON.stringify(made.body)}`);
    const objects = join(stack.env.DATA_DIR, 'objects');
    const sources = (made.body.data.images as { thumbnail_url: string }[]).map((i) =>
      join(objects, decodeURIComponent(new URL(i.thumbnail_url).pathname.replace(/^\/files\//, ''))),
    );
    const t0 = performance.now();
    const seeded = await seedScale(stack.env.DATABASE_URL, { tenants: [{ id: tenant.tenantId, count }], others: 0, otherTenants: 1 });
    const thumbsDir = join(objects, 'tenants', tenant.tenantId, 'thumbnails');
    mkdirSync(thumbsDir, { recursive: true });
    for (let i = 0; i < count; i++) linkSync(sources[i % sources.length], join(thumbsDir, `s-${i}.webp`));
    const seedMs = performance.now() - t0;
    const listed = await stack.api('/api/images?limit=1', { key: tenant.liveKey });
    const total = listed.body.pagination.total as number;
    if (total < count) throw new Error(`seeded ${total} images, expected ${count}`);

    // Sign in once; every run starts from that cookie in a fresh context (no HTTP cache).
    const signIn = await ui.newPage();
    await signInTenant(signIn.page, stack, tenant.liveKey);
    const storageState = await signIn.context.storageState();
    await signIn.context.close();

    const results: Run[] = [];
    let far = { tiles: 0, thumbs: 0, listCalls: 0 };
    for (let i = 0; i <= runs; i++) {
      const context = await ui.browser.newContext({ viewport: WIDTHS.desktop, colorScheme: 'light', storageState });
      context.setDefaultTimeout(60_000);
      const page = await context.newPage();
      await page.addInitScript(MARK_GRID_IMAGES);
      try {
        const r = await measure(page, `${stack.baseUrl}/console/gallery`);
        if (i > 0) results.push(r); // the first is a warm-up (the stack's caches, Chromium's code cache)
        if (i === 0) far = await scrollFar(page, FAR_PAGES);
      } finally {
        await context.close();
      }
    }

    const med = (k: keyof Run) => median(results.map((r) => r[k]));
    console.log(`\n== console-gallery: first gallery paint with ${total.toLocaleString()} images (Chromium, 1280x800, cold cache) ==`);
    console.log(`machine              ${machineLoad()}`);
    console.log(`seeding              ${fmt(seedMs / 1000, 1)} s (rows ${fmt(seeded.ms / 1000, 1)} s, ${count} thumbnail links)`);
    console.log(
      `first thumbnail      median ${fmt(med('firstThumbMs'), 0)} ms  (runs ${results.map((r) => fmt(r.firstThumbMs, 0)).join(', ')})`,
    );
    console.log(`first contentful     median ${fmt(med('fcpMs'), 0)} ms`);
    console.log(`GET /api/images      median responseEnd ${fmt(med('listEndMs'), 0)} ms after navigation start`);
    console.log(
      `loaded at first      ${results[0].tiles} tiles, ${results[0].thumbs} thumbnails fetched, ${results[0].listCalls} list call(s) (of ${total.toLocaleString()})`,
    );
    console.log(
      `after one scroll     ${results[0].tilesAfterScroll} tiles, ${results[0].thumbsAfterScroll} thumbnails fetched, ${results[0].listCallsAfterScroll} list calls`,
    );
    console.log(
      `after ${FAR_PAGES} pages       ${far.tiles} tiles in the grid (at most 8 pages are kept), ${far.thumbs} thumbnails fetched, ${far.listCalls} list calls`,
    );
    const worst = Math.max(...results.map((r) => r.tilesAfterScroll), far.tiles);
    if (worst >= total) throw new Error(`the gallery loaded all ${total} images`);
    console.log(`goal                 first thumbnail < 1000 ms: ${med('firstThumbMs') < 1000 ? 'met' : 'NOT met'}`);
  } finally {
    await ui.close();
    await stack.stop();
  }
}

interface Run {
  firstThumbMs: number;
  fcpMs: number;
  listEndMs: number;
  tiles: number;
  thumbs: number;
  listCalls: number;
  tilesAfterScroll: number;
  thumbsAfterScroll: number;
  listCallsAfterScroll: number;
}

/**
 * Runs before the page's own scripts (an init script through the DevTools protocol, which the console's CSP does
 * not govern): every <img> inserted into the grid gets elementtiming before it can paint, so Element Timing
 * reports its render time; the entries are kept in window.__thumbPaints.
 */
const MARK_GRID_IMAGES = `(() => {
  performance.setResourceTimingBufferSize(10000);
  const paints = (window.__thumbPaints = []);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.identifier === 'gallery-thumb') paints.push(e.renderTime || e.loadTime);
  }).observe({ type: 'element', buffered: true });
  new MutationObserver((records) => {
    for (const r of records)
      for (const n of r.addedNodes)
        if (n.nodeType === 1)
          for (const img of n.matches('.gallery-grid img') ? [n] : n.querySelectorAll('.gallery-grid img'))
            img.setAttribute('elementtiming', 'gallery-thumb');
  }).observe(document, { childList: true, subtree: true });
})();`;

async function measure(page: Page, url: string): Promise<Run> {
  await page.goto(url);
  await page.waitForFunction(() => ((window as unknown as { __thumbPaints: number[] }).__thumbPaints ?? []).length > 0);
  const first = await page.evaluate(() => {
    const paints = (window as unknown as { __thumbPaints: number[] }).__thumbPaints;
    const fcp = performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? Number.NaN;
    const list = (performance.getEntriesByType('resource') as PerformanceResourceTiming[]).filter((e) =>
      new URL(e.name).pathname.endsWith('/api/images'),
    );
    return { firstThumbMs: Math.min(...paints), fcpMs: fcp, listEndMs: list[0]?.responseEnd ?? Number.NaN };
  });
  // Let the first page settle (lazy thumbnails of the viewport), then count.
  await page.waitForTimeout(500);
  const before = await counts(page);
  // Scroll to the end once: the sentinel comes into view and the next page is appended.
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  await page.waitForFunction((n) => document.querySelectorAll('.gallery-grid li').length > n, before.tiles);
  await page.waitForTimeout(1500);
  const after = await counts(page);
  return {
    ...first,
    tiles: before.tiles,
    thumbs: before.thumbs,
    listCalls: before.listCalls,
    tilesAfterScroll: after.tiles,
    thumbsAfterScroll: after.thumbs,
    listCallsAfterScroll: after.listCalls,
  };
}

const FAR_PAGES = 20;

/** Scrolls to the end until `pages` pages were listed in all (800 images): what the grid then holds. */
async function scrollFar(page: Page, pages: number) {
  for (let n = (await counts(page)).listCalls; n < pages; n = (await counts(page)).listCalls) {
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    await page.waitForFunction((k) => performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/images')).length > k, n);
  }
  await page.waitForTimeout(500);
  return counts(page);
}

function counts(page: Page): Promise<{ tiles: number; thumbs: number; listCalls: number }> {
  return page.evaluate(() => {
    const res = performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname);
    return {
      tiles: document.querySelectorAll('.gallery-grid li').length,
      thumbs: res.filter((p) => p.includes('/thumbnails/')).length,
      listCalls: res.filter((p) => p.endsWith('/api/images')).length,
    };
  });
}
