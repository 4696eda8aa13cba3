import { createDb } from '@imagegen/platform';
import { listImagesJson, normalizeFilters } from '../../services/library/src/images/list-query.js';

const url = process.argv[2];
const sql = createDb(url, { schema: 'library', max: 1 });
const cases: Record<string, [Record<string, unknown>, number]> = {
  'page 1': [{}, 0],
  'offset=500000': [{}, 500000],
  'search exact 0.1%': [{ search: 'frozen whale' }, 0],
  'all 1%': [{ search: 'copper lantern', searchMode: 'all' }, 0],
  'any 10%': [{ search: 'misty harbor', searchMode: 'any' }, 0],
  'aspectRatio=16:9': [{ aspectRatio: '16:9' }, 0],
  'minSize=3000000': [{ minSize: 3000000 }, 0],
  'any+aspect+minSize': [{ search: 'misty harbor', searchMode: 'any', aspectRatio: '16:9', minSize: 3000000 }, 0],
};
function oldSql(tenant: string, f: Record<string, unknown>, offset: number) {
  const { filters: n } = normalizeFilters(f as never);
  const v: unknown[] = [tenant];
  const p = (x: unknown) => {
    v.push(x);
    return `$${v.length}`;
  };
  const like = (s: string) => `%${s}%`;
  const c = ['tenant_id = $1'];
  if (n.search) {
    if (n.searchMode === 'exact') c.push(`prompt ILIKE ${p(like(n.search))}`);
    else
      c.push(
        `(${n.search
          .split(/\s+/)
          .map((w) => `prompt ILIKE ${p(like(w))}`)
          .join(n.searchMode === 'all' ? ' AND ' : ' OR ')})`,
      );
  }
  if (n.aspectRatio) c.push(`aspect_ratio = ${p(n.aspectRatio)}`);
  if (n.minSize !== undefined) c.push(`size_bytes >= ${p(n.minSize)}`);
  const where = `WHERE ${c.join(' AND ')}`;
  const unf = c.length === 1;
  const total = unf
    ? 'COALESCE((SELECT image_count FROM tenant_stats WHERE tenant_id = $1), 0)::int'
    : `(SELECT count(*)::int FROM images ${where})`;
  return {
    text: `WITH page AS (SELECT id, created_at FROM images ${where} ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET ${p(offset)})
    SELECT ${total} AS total, json_agg(page ORDER BY created_at DESC, id DESC)::text FROM page`,
    values: v,
  };
}
const med = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const [name, [f, offset]] of Object.entries(cases)) {
  const o: number[] = [];
  const nw: number[] = [];
  for (let i = 0; i < 3; i++) {
    const q = oldSql('big', f, offset);
    let t = performance.now();
    await sql.unsafe(q.text, q.values as never[]);
    o.push(performance.now() - t);
    t = performance.now();
    await listImagesJson(sql, 'big', f as never, { limit: 20, offset }, '/f/');
    nw.push(performance.now() - t);
  }
  console.log(`${name.padEnd(22)} old ${med(o).toFixed(1).padStart(8)} ms   new ${med(nw).toFixed(1).padStart(7)} ms`);
}
process.exit(0);
