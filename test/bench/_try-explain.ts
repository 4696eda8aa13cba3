import { createDb } from '@imagegen/platform';
import { listImagesSql } from '../../services/library/src/images/list-query.js';

const url = process.argv[2];
const sql = createDb(url, { schema: 'library', max: 1 });
const cases: Record<string, Record<string, unknown>> = {
  page1: {},
  oldest: { sortBy: 'oldest' },
  largest: { sortBy: 'largest' },
  exact01: { search: 'frozen whale' },
  exact10: { search: 'copper' },
  all1: { search: 'copper lantern', searchMode: 'all' },
  any10: { search: 'misty harbor', searchMode: 'any' },
  aspect: { aspectRatio: '16:9' },
  minSize: { minSize: 3000000 },
  week: { dateFrom: '2026-06-01', dateTo: '2026-06-07' },
  tier: { resolutionTier: '4k' },
  tiers: { resolutionTier: '2k,4k' },
  model: { modelId: 'provA-pro-image' },
  edit: { operationType: 'edit' },
  neg: { hasNegativePrompt: true },
  noneg: { hasNegativePrompt: false },
  style: { stylePresetId: 42 },
  product: { productReferenceId: 7 },
  ref: { isReference: true },
  session: { sessionId: 'scale-big-500' },
  combo1: { search: 'misty harbor', searchMode: 'any', aspectRatio: '16:9', minSize: 3000000 },
  combo2: { search: 'copper', operationType: 'edit', dateFrom: '2026-03-01' },
  combo3: { search: 'frozen whale', sortBy: 'largest' },
  combo4: { aspectRatio: '21:9', resolutionTier: '4k', modelId: 'provB-image-2' },
  combo5: { search: 'lantern', sortBy: 'smallest', minSize: 1000000 },
  combo6: { search: 'copper lantern', searchMode: 'all', isReference: true },
  nomatch: { search: 'zebra unicorn' },
  maxSize: { maxSize: 250000 },
};
const only = process.argv[4];
for (const tenant of (process.argv[3] ?? 'big,small').split(',')) {
  for (const [name, f] of Object.entries(cases)) {
    if (only && !only.split(',').includes(name)) continue;
    const q = listImagesSql(tenant, f as never, { limit: 20 });
    const plan = await sql.unsafe(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.values as never[]);
    const lines = plan.map((r) => r['QUERY PLAN'] as string);
    const exec = lines.find((l) => l.startsWith('Execution Time'));
    console.log(`${tenant.padEnd(6)} ${name.padEnd(9)} ${exec}`);
    if (process.env.VERBOSE) console.log(lines.join('\n'));
  }
}
await sql.end();
process.exit(0);
