import { createHash } from 'node:crypto';
import { startTestStack } from '../support/stack.js';
import { seedListsAtScale, seedScale } from './scale-seed.js';
import { fmt, load, machineLoad } from './util.js';

/**
 * Issue 16 benchmark (`pnpm bench scale`): the image list queries at 10,000 and at 1,000,000 images in a tenant,
 * with 1,000,000 more images over 100 other tenants in the same table; p50/p99 of `GET /api/images?...` (and a
 * search preset run, and of the sessions list) through the gateway at 8 connections, and the growth of p99 from 10k to 1M.
 * Targets: p99 < 100 ms at 1M for page 1 and every filter, alone and combined, and p99 within 3x of 10k.
 * Seeding (scale-seed.ts) must take under two minutes.
 *
 * Item 4: the usage, executions, session, character, scene, product and style preset lists at the same two sizes, with
 * 100 executions per 1,000 images (1,000 and 100,000) and 10 of each asset (100 and 10,000; seedListsAtScale).
 *
 * BENCH_SECONDS (default 5 per query and size), BENCH_SCALE_IMAGES (default 1000000: the big tenant and the
 * others together), BENCH_SCALE_CONNECTIONS (default 8), BENCH_SCALE_ONLY (query names separated by ';').
 */
/** boundOnly: the page differs between the sizes (fewer rows exist at 10k), so only the 100 ms bound applies. */
const QUERIES: { name: string; query: string | ((size: number) => string); boundOnly?: boolean }[] = [
  { name: 'page 1, limit=20', query: 'limit=20' },
  { name: 'offset = half the images', query: (n) => `offset=${n / 2}` },
  { name: 'cursor at half the images', query: 'CURSOR' },
  { name: 'search exact (0.1%)', query: 'search=frozen%20whale' },
  { name: 'search exact (10%)', query: 'search=copper' },
  { name: 'searchMode=all, 2 words (1%)', query: 'search=copper%20lantern&searchMode=all' },
  { name: 'searchMode=any, 2 words (10%)', query: 'search=misty%20harbor&searchMode=any' },
  { name: 'search no match', query: 'search=zebra%20unicorn' },
  { name: 'aspectRatio=16:9 (10%)', query: 'aspectRatio=16:9' },
  { name: 'minSize=3000000 (26%)', query: 'minSize=3000000' },
  { name: 'maxSize=250000 (1.3%)', query: 'maxSize=250000' },
  { name: 'one week dateFrom/dateTo', query: 'DATES' },
  { name: 'operationType=edit (2%)', query: 'operationType=edit' },
  { name: 'modelId (1/6)', query: 'modelId=provA-pro-image' },
  { name: 'resolutionTier=2k,4k', query: 'resolutionTier=2k,4k' },
  { name: 'hasNegativePrompt=true', query: 'hasNegativePrompt=true' },
  { name: 'stylePresetId (0.5%)', query: 'stylePresetId=42' },
  { name: 'productReferenceId (0.2%)', query: 'productReferenceId=7' },
  { name: 'isReference=true (0.3%)', query: 'isReference=true' },
  { name: 'sessionId', query: 'SESSION' },
  { name: 'any + aspect + minSize', query: 'search=misty%20harbor&searchMode=any&aspectRatio=16:9&minSize=3000000' },
  { name: 'exact 10% + edit + dateFrom', query: 'search=copper&operationType=edit&DATEFROM' },
  { name: 'aspect + tier + model (0.4%)', query: 'aspectRatio=21:9&resolutionTier=4k&modelId=provB-image-2' },
  { name: 'all 1% + isReference', query: 'search=copper%20lantern&searchMode=all&isReference=true' },
  { name: 'preset: exact 0.1%, largest', query: 'PRESET:{"search":"frozen whale","sortBy":"largest"}' },
  // Sessions hold 1,000 images each: 10 sessions at 10k, 1,000 at 1M. The same page size at both sizes measures the
  // growth; a page of 100 full sessions (only 10 exist at 10k) the bound at 1M.
  { name: 'sessions list, limit=10', query: 'SESSIONS:limit=10' },
  { name: 'sessions, limit=100 (10 at 10k)', query: 'SESSIONS:limit=100', boundOnly: true },
  { name: 'preset: any 10%, smallest', query: 'PRESET:{"search":"misty harbor","searchMode":"any","sortBy":"smallest"}' },
];

/** An execution id the seeding wrote (md5 of tenant and row number, as a UUID). */
const seededExecutionId = (tenantId: string, i: number) =>
  createHash('md5')
    .update(`${tenantId}-${i}`)
    .digest('hex')
    .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');

/**
 * Item 4's lists: `n` is the tenant's image count (n / 10 executions, 100 per session; n / 100 of each asset). The
 * middle session (images and executions) and the middle execution are read at both sizes.
 */
const LIST_QUERIES: {
  name: string;
  path: (tenantId: string, n: number) => string;
  paths?: (tenantId: string, n: number) => string[];
  boundOnly?: boolean;
}[] = [
  { name: 'usage, limit=12', path: () => '/api/usage' },
  { name: 'usage, limit=24', path: () => '/api/usage?limit=24' },
  { name: 'executions active (5 running)', path: () => '/api/executions/active' },
  { name: 'session logs, limit=50 (of 100)', path: (t, n) => `/api/sessions/scale-${t}-${n / 2000}/logs?limit=50` },
  { name: 'execution detail with logs', path: (t, n) => `/api/executions/${seededExecutionId(t, n / 20 + 2)}` },
  // The same session read again (its rendered JSON kept), then every session of the tenant in turn (each rendered:
  // the bench's stack keeps 2 MiB of them, so reading them in a cycle never finds one kept).
  { name: 'session detail (1,000 images)', path: (t, n) => `/api/sessions/scale-${t}-${n / 2000}` },
  {
    name: 'session detail, each rendered',
    path: (t) => `/api/sessions/scale-${t}-0`,
    paths: (t, n) => Array.from({ length: n / 1000 }, (_, i) => `/api/sessions/scale-${t}-${i}`),
  },
  { name: 'characters, by name', path: () => '/api/characters' },
  { name: 'characters, sort_by=recent', path: () => '/api/characters?sort_by=recent' },
  { name: 'characters, sort_by=used', path: () => '/api/characters?sort_by=used' },
  { name: 'characters, offset = half', path: (_t, n) => `/api/characters?offset=${n / 200}` },
  // 1% of the assets is 1 at 10k and 100 at 1M: a page of 1 against a page of 50, so the bound only; the growth is
  // measured on pages of one row at both sizes.
  { name: 'characters, search (1%)', path: () => '/api/characters?search=lantern', boundOnly: true },
  { name: 'characters, search (1%), limit=1', path: () => '/api/characters?search=lantern&limit=1' },
  { name: 'scenes, by name', path: () => '/api/scenes' },
  { name: 'scenes, sort_by=created', path: () => '/api/scenes?sort_by=created' },
  { name: 'scenes, offset = half', path: (_t, n) => `/api/scenes?offset=${n / 200}` },
  { name: 'scenes, search (1%)', path: () => '/api/scenes?search=lantern', boundOnly: true },
  { name: 'scenes, search (1%), limit=1', path: () => '/api/scenes?search=lantern&limit=1' },
  { name: 'products, page 1', path: () => '/api/products' },
  { name: 'products, page = half', path: (_t, n) => `/api/products?page=${Math.round(n / 4000)}` },
  { name: 'products, search (1%)', path: () => '/api/products?search=lantern', boundOnly: true },
  { name: 'products, search 1%, page_size=1', path: () => '/api/products?search=lantern&page_size=1' },
  { name: 'style presets, page 1', path: () => '/api/style-presets' },
];

type Results = Map<string, { small?: Figure; big?: Figure; exact?: string; boundOnly?: boolean }>;

interface Figure {
  p50: number;
  p99: number;
  rps: number;
  bad: number;
}

export async function benchScale(): Promise<void> {
  const durationSec = Number(process.env.BENCH_SECONDS ?? 5);
  const big = Number(process.env.BENCH_SCALE_IMAGES ?? 1_000_000);
  const small = 10_000;
  const connections = Number(process.env.BENCH_SCALE_CONNECTIONS ?? 8);
  const only = process.env.BENCH_SCALE_ONLY?.split(';');
  process.env.RATE_LIMIT_DISABLED = '1';
  const stack = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1', SESSION_JSON_CACHE_MB: '2' } });
  try {
    const tenants = { small: await stack.createTenant(), big: await stack.createTenant() };
    const seeded = await seedScale(stack.env.DATABASE_URL, {
      tenants: [
        { id: tenants.small.tenantId, count: small },
        { id: tenants.big.tenantId, count: big },
      ],
      others: big,
      otherTenants: 100,
    });
    const listsSeeded = await seedListsAtScale(stack.env.DATABASE_URL, [
      { id: tenants.small.tenantId, count: small },
      { id: tenants.big.tenantId, count: big },
    ]);
    console.log(
      `\n== scale: image lists at ${small} and ${big} images in a tenant (${big} more over 100 tenants), ${connections} connections ==`,
    );
    console.log(
      `seeded ${seeded.rows} rows in ${fmt(seeded.ms / 1000, 1)} s (target < 120 s: rows ${fmt(seeded.phasesMs.insert / 1000, 1)} s, ` +
        `indexes rebuilt ${fmt(seeded.phasesMs.indexes / 1000, 1)} s, VACUUM ANALYZE ${fmt(seeded.phasesMs.vacuum / 1000, 1)} s); ${machineLoad()}`,
    );
    console.log(
      `seeded item 4's lists (executions with log lines, assets, usage) in ${fmt(listsSeeded.ms / 1000, 1)} s: ` +
        `${small / 10} and ${big / 10} executions, ${small / 100} and ${big / 100} of each asset`,
    );

    const results: Results = new Map();
    const listResults: Results = new Map();
    for (const [size, tenant, n] of [
      ['small', tenants.small, small],
      ['big', tenants.big, big],
    ] as const) {
      const headers = { 'x-api-key': tenant.liveKey };
      const get = async (path: string) => {
        const r = await fetch(`${stack.baseUrl}${path}`, { headers });
        if (r.status !== 200) throw new Error(`${path}: ${r.status} ${(await r.text()).slice(0, 300)}`);
        return (await r.json()) as { data: { createdAt: string }[]; pagination: { nextCursor: string | null; totalIsExact: boolean } };
      };
      /** Warms the query up for a second, then loads it for the bench's seconds; records its figures under `name`. */
      const measure = async (into: Results, name: string, path: string, boundOnly?: boolean, paths?: string[]) => {
        const first = (await get(path)) as unknown as {
          total?: number;
          totalIsExact?: boolean;
          pagination?: { total?: number; totalIsExact?: boolean };
        };
        const url = `${stack.baseUrl}${path}`;
        await load(url, { connections, durationSec: 1, headers, paths }); // warm-up (plans, caches)
        const r = await load(url, { connections, durationSec, headers, paths });
        const entry = into.get(name) ?? {};
        entry[size] = { p50: r.p50, p99: r.p99, rps: r.reqPerSec, bad: r.non2xx + r.errors };
        const totalIsExact = first.pagination?.totalIsExact ?? first.totalIsExact;
        const counted = first.pagination?.total ?? first.total;
        if (size === 'big') entry.exact = totalIsExact === false ? 'capped' : counted !== undefined ? 'exact' : '';
        entry.boundOnly = boundOnly;
        into.set(name, entry);
      };
      for (const q of QUERIES) {
        if (only && !only.includes(q.name)) continue;
        let qs = typeof q.query === 'function' ? q.query(n) : q.query;
        let path: string;
        if (qs === 'CURSOR') {
          const mid = await get(`/api/images?limit=20&offset=${n / 2}`);
          path = `/api/images?limit=20&cursor=${encodeURIComponent(mid.pagination.nextCursor as string)}`;
        } else if (qs.startsWith('SESSIONS:')) {
          path = `/api/sessions?${qs.slice(9)}`; // n / 1000 sessions of up to 1,000 images each, with their totals
        } else if (qs.startsWith('PRESET:')) {
          const r = await fetch(`${stack.baseUrl}/api/search-presets`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify({ presetName: `${q.name}`.slice(0, 50), filters: JSON.parse(qs.slice(7)) }),
          });
          if (r.status !== 200) throw new Error(`POST /api/search-presets: ${r.status} ${(await r.text()).slice(0, 300)}`);
          const preset = (await r.json()) as { data: { id: number } };
          path = `/api/search-presets/${preset.data.id}/images?limit=20`;
        } else {
          // One week in the middle of the year the rows span; a date half a year back; a session in the middle.
          const day = (daysBack: number) => new Date(Date.now() - daysBack * 86_400_000).toISOString().slice(0, 10);
          qs = qs
            .replace('DATES', `dateFrom=${day(180)}&dateTo=${day(174)}`)
            .replace('DATEFROM', `dateFrom=${day(180)}`)
            .replace('SESSION', `sessionId=scale-${tenant.tenantId}-${Math.floor(n / 2000)}`);
          path = `/api/images?${qs}`;
        }
        await measure(results, q.name, path, q.boundOnly);
      }
      for (const q of LIST_QUERIES) {
        if (only && !only.includes(q.name)) continue;
        await measure(listResults, q.name, q.path(tenant.tenantId, n), q.boundOnly, q.paths?.(tenant.tenantId, n));
      }
    }
    printTable('GET /api/images?...', results);
    printTable("item 4's lists", listResults);
  } finally {
    await stack.stop();
  }
}

/** One line per query: p50 / p99 at both sizes, the growth of p99, the big tenant's req/s, and how its total was counted. */
function printTable(title: string, results: Results): void {
  if (results.size === 0) return;
  const pad = (s: string, n: number) => s.padEnd(n);
  console.log(
    `${pad(title, 34)}${pad('10k p50 / p99 ms', 19)}${pad('1M p50 / p99 ms', 19)}${pad('growth p99', 12)}${pad('1M req/s', 10)}total`,
  );
  for (const [name, e] of results) {
    const f = (x?: Figure) => (x ? `${x.p50} / ${x.p99}${x.bad ? ` (${x.bad} bad)` : ''}` : '-');
    const growth = e.small && e.big ? `x${fmt(e.big.p99 / Math.max(e.small.p99, 1), 1)}` : '-';
    const grew = e.small && !e.boundOnly && e.big && e.big.p99 > 3 * Math.max(e.small.p99, 1);
    const flag = e.big && (e.big.p99 >= 100 || grew) ? '  <- over target' : '';
    console.log(
      `${pad(name, 34)}${pad(f(e.small), 19)}${pad(f(e.big), 19)}${pad(growth, 12)}${pad(e.big ? fmt(e.big.rps, 0) : '-', 10)}${e.exact ?? ''}${flag}`,
    );
  }
}
