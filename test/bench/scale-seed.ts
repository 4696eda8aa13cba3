import { createDb, MODEL_IDS, PLAIN_KEY_SQL } from '@imagegen/platform';
import { sessionImageRawSafeCheck } from '../../services/library/src/images/types.js';

/**
 * Seeding of `pnpm bench scale` (issue 16): image rows written straight into the library schema with
 * generate_series (no files: listing never opens them). Every value is a deterministic function of the row
 * number, so a query matches the same share of rows at 10,000 and at 1,000,000:
 *
 *   search 'frozen whale' (exact)            0.1%   the phrase appears only there
 *   search 'copper' (exact)                 10%
 *   'copper lantern' (all)                   1%    each word 10%, independently
 *   'misty harbor' (any)                    10%    each word 5%, never together
 *   aspect ratio                            every one of the 10 ratios, 10% each
 *   resolution tier 0.5k/1k/2k/4k           25% each; model: the six model ids, 1/6 each
 *   operation 'edit'                         2%    (else 'generate')
 *   negative prompt                         ~14%  ('blurry')
 *   size_bytes                              200,000 - 4,000,000 uniformly (minSize=3000000: ~26%)
 *   style_preset_id 42 0.5%, product_reference_id 7 0.2%, is_reference 0.3%
 *   created_at                              spread evenly over the last 365 days (row 0 is the newest)
 *   sessions                                1,000 images each (the session limit)
 *
 * The base prompt is drawn from word lists by independent hashes of the row number, so prompts vary
 * (40 x 30 x 25 x 20 combinations) and share trigrams the way real prompts do.
 */
export const ASPECT_RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
export const TIERS = ['0.5k', '1k', '2k', '4k'];

const SUBJECTS =
  'fox,owl,castle,robot,dancer,violin,tiger,garden,bridge,train,sailboat,mountain,teapot,dragon,astronaut,bicycle,cathedral,octopus,lighthouse,samurai,orchid,waterfall,panda,knight,city,desert,rabbit,clocktower,carousel,glacier,falcon,library,volcano,pirate,meadow,koi,temple,horse,windmill,penguin';
const ADJECTIVES =
  'ancient,vibrant,quiet,glowing,rusty,tiny,enormous,elegant,stormy,golden,shadowy,playful,serene,neon,weathered,crystal,velvet,wild,sleepy,radiant,gloomy,bright,silent,ornate,broken,floating,hidden,painted,sunlit,tangled';
const SETTINGS =
  'at dawn,at dusk,in the rain,under the stars,in winter,in spring,on a cliff,by the sea,in a forest,in the city,on mars,underwater,in a dream,at noon,in fog,in autumn,on a rooftop,in a cave,in the snow,at night,in a market,on a train,in a desert,by a river,in the clouds';
const STYLES =
  'oil painting,watercolor,pencil sketch,photograph,3d render,pixel art,anime style,charcoal drawing,isometric,studio lighting,cinematic,low poly,ink wash,pastel,vintage poster,macro shot,long exposure,digital art,woodcut,mosaic';

/** SQL text array literal of a comma-separated list. */
const arr = (list: string) =>
  `ARRAY[${list
    .split(',')
    .map((w) => `'${w.replace(/'/g, "''")}'`)
    .join(',')}]`;
const pick = (list: string, salt: number) =>
  `(${arr(list)})[1 + ((hashint8(i * 31 + ${salt}) & 9223372036854775807) % ${list.split(',').length})]`;

/** The SELECT list producing one image row per `i` for tenant expression `tenant` over `total` rows. */
function rowsSql(tenant: string, total: string): string {
  const h = (salt: number, mod: number) => `((hashint8(i * 1000003 + ${salt}) & 9223372036854775807) % ${mod})`;
  return `
    SELECT ${tenant}, 'scale-' || ${tenant} || '-' || (i / 1000),
      'tenants/' || ${tenant} || '/images/s-' || i || '.png',
      'tenants/' || ${tenant} || '/thumbnails/s-' || i || '.webp',
      'image/png', 'png', 'image/webp', 1024, 1024,
      200000 + ${h(1, 3800000)}, 9000 + ${h(2, 500)},
      ${pick(ADJECTIVES, 3)} || ' ' || ${pick(SUBJECTS, 4)} || ' ' || ${pick(SETTINGS, 5)} || ', ' || ${pick(STYLES, 6)}
        || CASE WHEN i % 1000 = 7 THEN ' with a frozen whale' ELSE '' END
        || CASE WHEN ${h(7, 10)} = 3 THEN ' copper' ELSE '' END
        || CASE WHEN ${h(8, 10)} = 3 THEN ' lantern' ELSE '' END
        || CASE ${h(9, 20)} WHEN 5 THEN ' misty' WHEN 11 THEN ' harbor' ELSE '' END,
      CASE WHEN ${h(10, 7)} = 0 THEN 'blurry' END,
      CASE WHEN ${h(11, 50)} = 0 THEN 'edit' ELSE 'generate' END,
      (${arr(ASPECT_RATIOS.join(','))})[1 + ${h(12, 10)}],
      (${arr(MODEL_IDS.join(','))})[1 + ${h(13, 6)}],
      (${arr(TIERS.join(','))})[1 + ${h(14, 4)}],
      CASE WHEN ${h(15, 200)} = 0 THEN 42 END,
      CASE WHEN ${h(16, 500)} = 0 THEN 7 END,
      ${h(17, 1000)} < 3, 'live', 1290,
      now() - make_interval(secs => i::float8 * 31536000 / ${total})
    FROM generate_series(0::bigint, ${total} - 1) i`;
}

const COLUMNS = `tenant_id, session_id, object_key, thumbnail_key, mime_type, format, thumbnail_mime_type, width, height,
  size_bytes, thumbnail_size_bytes, prompt, negative_prompt, operation, aspect_ratio, model_id, resolution_tier,
  style_preset_id, product_reference_id, is_reference, key_type, tokens, created_at`;

/** The rows of `select` (COLUMNS) inserted with the verdict a store writes with them (json_plain, migration 300). */
const insertImages = (select: string) =>
  `INSERT INTO images (${COLUMNS}, json_plain) SELECT v.*, ${sessionImageRawSafeCheck(`'${PLAIN_KEY_SQL}'`)} FROM (${select}) AS v(${COLUMNS})`;

/**
 * Seeds `tenants` (each with its own row count) plus `others` rows spread over `otherTenants` tenant ids
 * that exist only in the images table. The images indexes are dropped during the load and built again
 * afterwards from their own definitions (pg_indexes), far faster than maintaining them row by row; then
 * VACUUM ANALYZE (a table in steady state has been vacuumed: visibility map, statistics).
 */
export async function seedScale(
  databaseUrl: string,
  opts: { tenants: { id: string; count: number }[]; others: number; otherTenants: number },
): Promise<{ ms: number; rows: number; phasesMs: { insert: number; indexes: number; vacuum: number } }> {
  const t0 = performance.now();
  // Two connections (the machine's two cores): the tenants' rows and the others' load side by side, and the
  // index builds are shared between them, largest table scans interleaved.
  const sql = createDb(databaseUrl, { schema: 'library', max: 2 });
  try {
    const defs = (await sql`
      SELECT indexname, indexdef FROM pg_indexes
      WHERE schemaname = 'library' AND tablename = 'images' AND indexname <> 'images_pkey'`) as unknown as {
      indexname: string;
      indexdef: string;
    }[];
    for (const d of defs) await sql.unsafe(`DROP INDEX library."${d.indexname}"`);
    const seedTenants = async () => {
      for (const t of opts.tenants) {
        await sql.unsafe(
          `INSERT INTO sessions (tenant_id, session_id, is_active, image_count, created_at, last_activity_at)
           SELECT $1::text, 'scale-' || $1::text || '-' || s, false, LEAST(1000, $2::int - s * 1000),
             now() - make_interval(days => 365) + make_interval(secs => s * 1000 * 31536000.0 / $2::int),
             now() - make_interval(secs => s * 1000 * 31536000.0 / $2::int)
           FROM generate_series(0, ($2::int - 1) / 1000) s ON CONFLICT DO NOTHING`,
          [t.id, t.count],
        );
        // After the sessions: the insert trigger adds the images to their sessions' totals (migration 180).
        await sql.unsafe(insertImages(rowsSql('$1::text', String(t.count))), [t.id]);
      }
    };
    // Interleaved with nothing in particular: tenant = row number modulo the tenant count.
    const seedOthers = async () => {
      if (opts.others > 0) await sql.unsafe(insertImages(rowsSql(`('scale-other-' || (i % ${opts.otherTenants}))`, String(opts.others))));
    };
    await Promise.all([seedTenants(), seedOthers()]);
    const inserted = performance.now();
    const rows = opts.tenants.reduce((a, t) => a + t.count, 0) + opts.others;
    // The prompt trigram keys' GIN index first: it alone takes about as long as the twelve btrees together
    // (2M rows: ~60 s, most of it computing each row's keys), so one connection builds it while the other builds
    // the rest; started last, as pg_indexes lists it, it ran alone at the end (~20 s more). GIN builds gain from
    // memory (2M rows: 70 s at 256 MB, 58 s at 1 GB).
    const queue = [...defs].sort((a, b) => Number(b.indexdef.includes(' USING gin ')) - Number(a.indexdef.includes(' USING gin ')));
    const build = async () => {
      await sql.begin(async (tx) => {
        await tx.unsafe(`SET LOCAL maintenance_work_mem = '1GB'`);
        for (let d = queue.shift(); d; d = queue.shift()) await tx.unsafe(d.indexdef);
      });
    };
    await Promise.all([build(), build()]);
    const indexed = performance.now();
    await Promise.all([sql`VACUUM (ANALYZE) images`, sql`VACUUM (ANALYZE) sessions`]);
    const end = performance.now();
    return { ms: end - t0, rows, phasesMs: { insert: inserted - t0, indexes: indexed - inserted, vacuum: end - indexed } };
  } finally {
    await sql.end();
  }
}

/** A running execution seeded by the bench belongs to this liveness row, kept fresh so no reaper fails it meanwhile. */
const SEED_INSTANCE = 'scale-seed';

/**
 * Item 4's lists for `pnpm bench scale`: in each tenant (after its images, whose ids the assets refer to), per
 * 1,000 images 100 executions (3 log lines each; the session of 1,000 images gets 100; 2% failed; the newest 5 of
 * the tenant running), 10 each of characters, scenes, products and style presets (names and tags from word
 * lists: 'lantern' in 1% of them), 12 months and 32 days of hourly usage. So at 1M images: 100,000 executions,
 * 300,000 log lines, 10,000 of each asset. Rows only (no files): lists never open them.
 */
export async function seedListsAtScale(databaseUrl: string, tenants: { id: string; count: number }[]): Promise<{ ms: number }> {
  const t0 = performance.now();
  const sql = createDb(databaseUrl, { schema: 'public', max: 2 });
  try {
    await sql.unsafe(`INSERT INTO generation.instances (instance_id, heartbeat_at) VALUES ('${SEED_INSTANCE}', now() + interval '1 day')
      ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`);
    for (const t of tenants) {
      const executions = t.count / 10;
      const assets = t.count / 100;
      await Promise.all([seedExecutions(sql, t.id, executions), seedAssetsAndUsage(sql, t.id, assets)]);
    }
    await Promise.all(
      ['generation.executions', 'generation.execution_logs', 'library.characters', 'library.scenes', 'library.products'].map((table) =>
        sql.unsafe(`VACUUM (ANALYZE) ${table}`),
      ),
    );
    return { ms: performance.now() - t0 };
  } finally {
    await sql.end();
  }
}

/** `n` executions over the tenant's sessions (100 each, session s holding executions 100s..100s+99, newest first). */
async function seedExecutions(sql: ReturnType<typeof createDb>, tenant: string, n: number): Promise<void> {
  await sql.unsafe(
    `INSERT INTO generation.executions (execution_id, tenant_id, session_id, tool_name, tool_source, status, progress_percent,
       current_step, model_id, started_at, updated_at, completed_at, duration_ms, result_summary, error, images, log_count,
       instance_id, image_ids, images_requested)
     SELECT md5($1 || '-' || i)::uuid::text, $1, 'scale-' || $1 || '-' || (i / 100), 'generate_image', 'tenant_api',
       CASE WHEN i < 5 THEN 'running' WHEN i % 50 = 1 THEN 'failed' ELSE 'completed' END,
       CASE WHEN i < 5 THEN 40 ELSE 100 END, CASE WHEN i < 5 THEN 'generating' ELSE 'completed' END, 'provA-pro-image',
       at, at, CASE WHEN i >= 5 THEN at + interval '20 seconds' END, CASE WHEN i >= 5 THEN 20000 END,
       CASE WHEN i < 5 THEN NULL WHEN i % 50 = 1 THEN 'Failed: provider error' ELSE 'Generated 1 of 1 image(s)' END,
       CASE WHEN i % 50 = 1 AND i >= 5 THEN 'provider error' END, CASE WHEN i % 50 = 1 OR i < 5 THEN 0 ELSE 1 END, 3,
       CASE WHEN i < 5 THEN '${SEED_INSTANCE}' END, CASE WHEN i >= 5 AND i % 50 <> 1 THEN ARRAY[i] END, 1
     FROM generate_series(0, $2::int - 1) i, LATERAL (SELECT now() - make_interval(secs => i::float8 * 31536000 / $2::int) AS at) a`,
    [tenant, n],
  );
  await sql.unsafe(
    `INSERT INTO generation.execution_logs (execution_id, tenant_id, logged_at, level, message)
     SELECT md5($1 || '-' || i)::uuid::text, $1, now() - make_interval(secs => i::float8 * 31536000 / $2::int) + make_interval(secs => l * 5),
       'info', (ARRAY['Generating 1 image(s) with provA-pro-image', 'Received 1 image(s) from provA; storing', 'Completed'])[l + 1]
     FROM generate_series(0, $2::int - 1) i, generate_series(0, 2) l`,
    [tenant, n],
  );
}

/** `n` each of characters, scenes, products and style presets, and the tenant's usage of the last year. */
async function seedAssetsAndUsage(sql: ReturnType<typeof createDb>, tenant: string, n: number): Promise<void> {
  // Reference images: three of the tenant's 3,000 newest images per asset.
  const refs = `(SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM library.images WHERE tenant_id = $1 ORDER BY created_at DESC LIMIT 3000) x)`;
  const word = `(${arr(SUBJECTS)})[1 + (i % 40)]`;
  const tag = `CASE WHEN i % 100 = 7 THEN 'lantern' ELSE (${arr(ADJECTIVES)})[1 + (i % 30)] END`;
  const common = `now() - make_interval(secs => i::float8 * 31536000 / $2::int), now(),
    CASE WHEN i % 3 = 0 THEN NULL ELSE now() - make_interval(secs => (i * 7 % $2::int)::float8 * 31536000 / $2::int) END, (i * 13) % 50`;
  await sql.unsafe(
    `WITH r AS (SELECT ${refs} AS a)
     INSERT INTO library.characters (tenant_id, character_name, description, base_prompt, reference_image_ids, tags,
       created_at, updated_at, last_used_at, times_used)
     SELECT $1, ${word} || ' character ' || i, 'a ' || ${tag} || ' ' || ${word}, 'a portrait of a ' || ${word} || ' in detail',
       ARRAY[r.a[1 + (i * 3) % 3000], r.a[1 + (i * 3 + 1) % 3000], r.a[1 + (i * 3 + 2) % 3000]], ARRAY[${tag}], ${common}
     FROM generate_series(0, $2::int - 1) i, r`,
    [tenant, n],
  );
  await sql.unsafe(
    `WITH r AS (SELECT ${refs} AS a)
     INSERT INTO library.scenes (tenant_id, scene_name, description, scene_prompt, reference_image_ids, tags,
       created_at, updated_at, last_used_at, times_used)
     SELECT $1, ${word} || ' scene ' || i, 'a ' || ${tag} || ' place', 'a wide view of a ' || ${word},
       ARRAY[r.a[1 + (i * 2) % 3000], r.a[1 + (i * 2 + 1) % 3000]], ARRAY[${tag}], ${common}
     FROM generate_series(0, $2::int - 1) i, r`,
    [tenant, n],
  );
  await sql.unsafe(
    `INSERT INTO library.products (tenant_id, product_name, product_description, product_url, tags, object_key,
       object_thumbnail_key, width, height, size_bytes, thumbnail_size_bytes, format, mime_type,
       created_at, updated_at, last_used_at, times_used)
     SELECT $1, ${word} || ' product ' || i, 'a ' || ${tag} || ' ' || ${word} || ' product', 'https://shop.example/p/' || i, ${tag},
       'tenants/' || $1 || '/products/p-' || i || '.png', 'tenants/' || $1 || '/thumbnails/p-' || i || '.webp',
       800, 800, 250000, 9000, 'png', 'image/png', ${common}
     FROM generate_series(0, $2::int - 1) i`,
    [tenant, n],
  );
  await sql.unsafe(
    `INSERT INTO library.style_presets (tenant_id, name, prompt, created_at, updated_at, last_used_at, times_used)
     SELECT $1, ${word} || ' style ' || i, 'in the style of a ' || ${tag} || ' ' || ${word}, ${common}
     FROM generate_series(0, $2::int - 1) i`,
    [tenant, n],
  );
  await sql.unsafe(
    `INSERT INTO usage.usage_months (tenant_id, month, total_operations, total_images, total_bytes, duration_ms_sum, duration_count)
     SELECT $1, to_char(date_trunc('month', now()) - make_interval(months => m), 'YYYY-MM'), $2::int * 10, $2::int * 8,
       $2::bigint * 8 * 2000000, $2::bigint * 10 * 20000, $2::int * 10
     FROM generate_series(0, 11) m ON CONFLICT DO NOTHING`,
    [tenant, n],
  );
  await sql.unsafe(
    `INSERT INTO usage.usage_hours (tenant_id, hour, operations, images, bytes)
     SELECT $1, date_trunc('hour', now()) - make_interval(hours => h), 3, 2, 4000000
     FROM generate_series(0, 32 * 24 - 1) h ON CONFLICT DO NOTHING`,
    [tenant],
  );
}
