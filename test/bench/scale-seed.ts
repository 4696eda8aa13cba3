import { createDb, MODEL_IDS } from '@imagegen/platform';

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
        await sql.unsafe(`INSERT INTO images (${COLUMNS}) ${rowsSql('$1::text', String(t.count))}`, [t.id]);
      }
    };
    // Interleaved with nothing in particular: tenant = row number modulo the tenant count.
    const seedOthers = async () => {
      if (opts.others > 0)
        await sql.unsafe(
          `INSERT INTO images (${COLUMNS}) ${rowsSql(`('scale-other-' || (i % ${opts.otherTenants}))`, String(opts.others))}`,
        );
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
