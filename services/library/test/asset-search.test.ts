import { AssetsServiceService } from '@imagegen/contracts/library/v1/assets';
import { createClient, type Sql } from '@imagegen/platform';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assetListWhere } from '../src/assets/common.js';
import { type LibraryHarness, startLibrary } from './support.js';

/**
 * Issue 16 item 4: character, scene and product searches read their candidates from a (tenant, trigram) key index
 * (migrations 260 and 270), and so does the style presets' search (extension, migration 330). Their answers must be
 * exactly those of the queries they replaced (every field tested with ILIKE), and the index must be what a search of
 * a large tenant reads.
 */
let h: LibraryHarness;
let assets: ReturnType<typeof createClient<typeof AssetsServiceService>>;

beforeAll(async () => {
  h = await startLibrary();
  assets = createClient(AssetsServiceService, h.running.grpcAddress as string);
});
afterAll(async () => {
  assets?.close();
  await h?.stop();
});

const WORDS = [
  'Lantern',
  'copper',
  'o’Neil',
  'café',
  'CAFE',
  'sea-side',
  '50%',
  'snake_case',
  'x',
  'Ab',
  'misty',
  'Harbor',
  '東京',
  'naïve',
];

/** The searches the lists answered before the key index: each searchable field tested with ILIKE '%term%'. */
const OLD_QUERIES: Record<'characters' | 'scenes' | 'products' | 'style_presets', { fields: string; order: string }> = {
  characters: {
    fields: `character_name ILIKE $2 OR coalesce(description, '') ILIKE $2 OR array_to_string(tags, ' ') ILIKE $2`,
    order: 'lower(character_name), character_name, id',
  },
  scenes: {
    fields: `scene_name ILIKE $2 OR coalesce(description, '') ILIKE $2 OR coalesce(scene_prompt, '') ILIKE $2
      OR array_to_string(tags, ' ') ILIKE $2`,
    order: 'lower(scene_name), scene_name, id',
  },
  products: {
    fields: `product_name ILIKE $2 OR coalesce(product_description, '') ILIKE $2 OR tags ILIKE $2`,
    order: 'created_at DESC, id DESC',
  },
  // extension: the style presets' search (migration 330), in the name and the prompt
  style_presets: {
    fields: `name ILIKE $2 OR coalesce(prompt, '') ILIKE $2`,
    order: 'lower(name), name, id',
  },
};

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

async function oldIds(sql: Sql, list: keyof typeof OLD_QUERIES, tenant: string, term: string): Promise<number[]> {
  const q = OLD_QUERIES[list];
  const rows = await sql.unsafe(`SELECT id FROM ${list} WHERE tenant_id = $1 AND (${q.fields}) ORDER BY ${q.order}`, [
    tenant,
    likePattern(term.trim()),
  ]);
  return rows.map((r) => Number(r.id));
}

/** Every id of the list's answer to `term` (all pages, through the cursors) and the total it announced. */
async function newIds(list: keyof typeof OLD_QUERIES, tenant: string, term: string): Promise<{ ids: number[]; total: number }> {
  const p = h.principal(tenant);
  const ids: number[] = [];
  let cursor: string | undefined;
  let total = -1;
  do {
    if (list === 'products') {
      const r = await assets.listProducts({ page: 1, pageSize: 100, search: term, cursor }, p);
      ids.push(...r.products.map((x) => x.id));
      total = r.total;
      cursor = r.nextCursor;
    } else if (list === 'style_presets') {
      const r = await assets.listStylePresets({ limit: 100, offset: 0, search: term, cursor }, p);
      ids.push(...r.presets.map((x) => x.id));
      total = r.total;
      cursor = r.nextCursor;
    } else {
      const req = { limit: 100, offset: 0, search: term, sortBy: 'name', cursor };
      const r = list === 'characters' ? await assets.listCharacters(req, p) : await assets.listScenes(req, p);
      ids.push(
        ...(list === 'characters' ? (r as { characters: { id: number }[] }).characters : (r as { scenes: { id: number }[] }).scenes).map(
          (x) => x.id,
        ),
      );
      total = r.total;
      cursor = r.nextCursor;
    }
  } while (cursor);
  return { ids, total };
}

/** `n` assets of each list for `tenant`, their fields made of WORDS (by a seeded generator), NULLs and empty tags among them. */
async function seed(sql: Sql, tenant: string, n: number, seedValue: number): Promise<void> {
  const text = fc
    .tuple(fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 4 }), fc.constantFrom(' ', ', ', '-'))
    .map(([words, separator]) => words.join(separator));
  const rows = fc.sample(
    fc.record({
      name: text,
      description: fc.option(text),
      prompt: fc.option(text),
      tags: fc.array(fc.constantFrom(...WORDS), { maxLength: 3 }),
    }),
    { numRuns: n, seed: seedValue },
  );
  const items = rows.map((r, i) => ({ ...r, name: `${r.name} ${i}` })); // names are unique per tenant
  await sql`
    INSERT INTO characters (tenant_id, character_name, description, base_prompt, tags)
    SELECT ${tenant}, x.name, x.description, 'a portrait', ARRAY(SELECT jsonb_array_elements_text(x.tags))
    FROM jsonb_to_recordset(${sql.json(items as never)}) AS x(name text, description text, tags jsonb)`;
  await sql`
    INSERT INTO scenes (tenant_id, scene_name, description, scene_prompt, tags)
    SELECT ${tenant}, x.name, x.description, x.prompt, ARRAY(SELECT jsonb_array_elements_text(x.tags))
    FROM jsonb_to_recordset(${sql.json(items as never)}) AS x(name text, description text, prompt text, tags jsonb)`;
  await sql`
    INSERT INTO products (tenant_id, product_name, product_description, product_url, tags, object_key, object_thumbnail_key,
      width, height, size_bytes, thumbnail_size_bytes, format, mime_type)
    SELECT ${tenant}, x.name, x.description, 'https://shop.example/p', array_to_string(ARRAY(SELECT jsonb_array_elements_text(x.tags)), ','),
      'tenants/' || ${tenant} || '/products/' || x.name || '.png', 'tenants/' || ${tenant} || '/thumbnails/' || x.name || '.webp',
      1, 1, 1, 1, 'png', 'image/png'
    FROM jsonb_to_recordset(${sql.json(items as never)}) AS x(name text, description text, tags jsonb)`;
  await sql`
    INSERT INTO style_presets (tenant_id, name, prompt)
    SELECT ${tenant}, x.name, x.prompt FROM jsonb_to_recordset(${sql.json(items as never)}) AS x(name text, prompt text)`;
}

/** The plan (JSON) of the list's count under the handler's own WHERE (assetListWhere). */
async function countPlan(list: 'characters' | 'style_presets', tenant: string, term: string): Promise<string> {
  const [r] =
    await h.sql`EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM ${h.sql(list)} WHERE ${assetListWhere(h.sql, list, tenant, term)}`;
  return JSON.stringify(r['QUERY PLAN']);
}

describe('asset searches through the key index', () => {
  it('answer exactly what the ILIKE queries answered, for random terms (substrings across words, case, %, _, unicode)', async () => {
    await seed(h.sql, 'tS1', 150, 1);
    await seed(h.sql, 'tS2', 150, 2); // another tenant's assets share every word: never in tS1's answers
    await h.sql`ANALYZE characters; ANALYZE scenes; ANALYZE products; ANALYZE style_presets`.simple();
    const corpus = WORDS.join(' ').concat(' Lantern copper misty Harbor sea-side');
    const term = fc.oneof(
      // any substring of the words, spaces and punctuation included
      fc.tuple(fc.nat(corpus.length - 1), fc.integer({ min: 1, max: 12 })).map(([at, len]) => corpus.slice(at, at + len)),
      fc.constantFrom(...WORDS).map((w) => w.toUpperCase()),
      fc.constantFrom('ant', 'ANTERN C', 'pper', 'a', 'ab', '%', '_', 'e_c', '0%', 'zzz', 'side 1', ' copper ', 'caf', 'naï', '京'),
    );
    await fc.assert(
      fc.asyncProperty(
        term,
        fc.constantFrom('characters' as const, 'scenes' as const, 'products' as const, 'style_presets' as const),
        async (t, list) => {
          if (!t.trim()) return;
          const expected = await oldIds(h.sql, list, 'tS1', t);
          const got = await newIds(list, 'tS1', t);
          expect(got.ids).toEqual(expected);
          expect(got.total).toBe(expected.length);
        },
      ),
      { numRuns: 120, seed: 16 },
    );
  });

  it('a search of a large tenant reads the key index (EXPLAIN at 20,000 assets in 4 tenants)', async () => {
    await h.sql`
      INSERT INTO characters (tenant_id, character_name, description, base_prompt, tags)
      SELECT 'tBig' || (i % 4), 'fox character ' || i, CASE WHEN i % 100 = 7 THEN 'a lantern keeper' ELSE 'a quiet fox' END,
        'a portrait', ARRAY['wild']
      FROM generate_series(1, 20000) i`;
    await h.sql`ANALYZE characters`;
    const plan = (term: string) => countPlan('characters', 'tBig3', term);
    expect(await plan('lantern')).toContain('characters_search_keys');
    expect(await plan('lantern keeper')).toContain('characters_search_keys');
    expect(await plan('ab')).not.toContain('characters_search_keys'); // no run of three letters: no keys to read
    const answer = await assets.listCharacters({ limit: 10, offset: 0, search: 'lantern', sortBy: 'name' }, h.principal('tBig3'));
    expect(answer.total).toBe(200); // i % 100 = 7, so i % 4 = 3: all 200 in tBig3
    expect(answer.characters).toHaveLength(10);
  });

  it("a style presets' search reads its key index (extension; EXPLAIN at 20,000 presets in 4 tenants)", async () => {
    await h.sql`
      INSERT INTO style_presets (tenant_id, name, prompt)
      SELECT 'tBig' || (i % 4), 'style ' || i, CASE WHEN i % 100 = 7 THEN 'sumi ink wash' ELSE 'bright colours' END
      FROM generate_series(1, 20000) i`;
    await h.sql`ANALYZE style_presets`;
    const plan = (term: string) => countPlan('style_presets', 'tBig3', term);
    expect(await plan('sumi')).toContain('style_presets_search_keys');
    expect(await plan('ink wash')).toContain('style_presets_search_keys');
    const answer = await assets.listStylePresets({ limit: 10, offset: 0, search: 'sumi' }, h.principal('tBig3'));
    expect(answer.total).toBe(200);
    expect(answer.presets).toHaveLength(10);
  });
});
