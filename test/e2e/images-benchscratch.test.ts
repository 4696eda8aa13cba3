import autocannon from 'autocannon';
import { createDb } from '@imagegen/platform';
import { afterAll, beforeAll, it } from 'vitest';
import { startTestStack, type TestStack } from '../support/stack.js';
import { librarySeeder } from './images-seed.js';

let s: TestStack;
beforeAll(async () => { s = await startTestStack({ env: { DB_POOL_MAX: '10', RATE_LIMIT_DISABLED: '1' } }); });
afterAll(async () => { await s?.stop(); });

it('bench', async () => {
  const t = await s.createTenant({ rate_limit_per_minute: 1000000000 });
  const seed = librarySeeder(s);
  const img = await seed.store(t.tenantId);
  seed.close();
  const sql = createDb(s.env.DATABASE_URL as string, { schema: 'library', max: 1 });
  await sql`INSERT INTO images (tenant_id, session_id, object_key, thumbnail_key, mime_type, format, width, height, size_bytes, thumbnail_size_bytes, prompt, operation, aspect_ratio, model_id, resolution_tier, created_at)
      SELECT ${t.tenantId}, 'bench-' || (g % 10), ${img.objectKey}, ${img.thumbnailKey}, 'image/png', 'png', 64, 64, 1000 + g, 100, 'bench prompt number ' || g, 'generate', '1:1', 'provA-flash-lite-image', '1k', now() - (g || ' seconds')::interval
      FROM generate_series(1, 10000) g`;
  await sql`ANALYZE images`;
  await sql.end();
  const codes: Record<number, number> = {};
  let sample = '';
  await Promise.all(Array.from({ length: 40 }, async () => {
    const res = await s.api('/api/images?limit=20', { key: t.liveKey });
    codes[res.status] = (codes[res.status] ?? 0) + 1;
    if (res.status !== 200) sample = JSON.stringify(res.body);
  }));
  console.log('codes', JSON.stringify(codes), sample);
  const inst = autocannon({ url: `${s.baseUrl}/api/images?limit=20`, connections: 1, amount: 30, headers: { 'x-api-key': t.liveKey } });
  const seen: Record<string, number> = {};
  inst.on('response', (client: any, status: number) => { seen[status] = (seen[status] ?? 0) + 1; });
  (inst as any).on('reqError', (e: any) => console.log('reqError', e?.message));
  await inst;
  console.log('autocannon statuses', JSON.stringify(seen));
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 5; i++) {
    await new Promise<void>((resolve) => {
      http.get(`${s.baseUrl}/api/images?limit=20`, { agent, headers: { 'x-api-key': t.liveKey } }, (res) => {
        let b = ''; res.on('data', (c) => (b += c)); res.on('end', () => { console.log('keepalive', i, res.statusCode, b.slice(0, 120)); resolve(); });
      });
    });
  }
  for (const c of [1, 20]) {
    const r = await autocannon({ url: `${s.baseUrl}/api/images?limit=20`, connections: c, duration: 5, headers: { 'x-api-key': t.liveKey } });
    console.log('conns', c, 'rps', r.requests.average, 'p50', r.latency.p50, 'p99', r.latency.p99, 'non2xx', r.non2xx);
  }
  const r = await autocannon({ url: `${s.baseUrl}/health`, connections: 20, duration: 3 });
  console.log('health rps', r.requests.average, 'p50', r.latency.p50, 'p99', r.latency.p99);
}, 120_000);
