import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import { startTestStack } from '../support/stack.js';
import { fmt, type LoadResult, load, machineLoad, median } from './util.js';

/**
 * Issue 40, item 3: what GET /files/<key> costs now that the gateway asks the library whether a key awaits
 * removal (a deleted image's files stay for OBJECT_DELETE_GRACE, not served). The gallery's thumbnails, 50
 * connections, against a bare fastify streaming the same file from disk (the floor), same process, alternating
 * BENCH_ROUNDS (3) rounds of BENCH_SECONDS (5).
 */
export async function benchFiles(): Promise<void> {
  const durationSec = Number(process.env.BENCH_SECONDS ?? 5);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const connections = 50;
  const stack = await startTestStack({ env: { RATE_LIMIT_DISABLED: '1' } });
  const bare = Fastify();
  try {
    const tenant = await stack.createTenant();
    const made = await stack.api('/api/images', { key: tenant.liveKey, body: { prompt: 'a thumbnail to serve', n: 4 } });
    if (made.status !== 200) throw new Error(`generate: ${made.status} ${JSON.stringify(made.body)}`);
    const thumbs = (made.body.data.images as { thumbnail_url: string }[]).map((i) => new URL(i.thumbnail_url).pathname);
    const objects = join(stack.env.DATA_DIR, 'objects');
    bare.get('/files/*', (req, reply) => {
      const key = (req.params as { '*': string })['*'];
      reply.header('content-type', 'image/webp').send(createReadStream(join(objects, key)));
    });
    const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
    await load(bareUrl, { connections, durationSec: 2, paths: thumbs });
    await load(stack.baseUrl, { connections, durationSec: 2, paths: thumbs });
    const b: LoadResult[] = [];
    const g: LoadResult[] = [];
    const loads: string[] = [];
    for (let i = 0; i < rounds; i++) {
      loads.push(machineLoad());
      b.push(await load(bareUrl, { connections, durationSec, paths: thumbs }));
      g.push(await load(stack.baseUrl, { connections, durationSec, paths: thumbs }));
    }
    const med = (rs: LoadResult[], k: keyof LoadResult) => median(rs.map((r) => r[k]));
    console.log(
      `\n== files: GET /files/<thumbnail> through the gateway vs bare fastify streaming the file (${connections} connections) ==`,
    );
    console.log(`machine          ${loads.join(', ')}`);
    console.log(`bare fastify     ${fmt(med(b, 'reqPerSec'), 0)} req/s  p50 ${med(b, 'p50')} ms  p99 ${med(b, 'p99')} ms`);
    console.log(
      `GET /files/...   ${fmt(med(g, 'reqPerSec'), 0)} req/s  p50 ${med(g, 'p50')} ms  p99 ${med(g, 'p99')} ms  non-2xx ${g.reduce((a, r) => a + r.non2xx, 0)}`,
    );
    console.log(`ratio            ${fmt(median(g.map((r, i) => r.reqPerSec / b[i].reqPerSec)) * 100)}% of bare`);
  } finally {
    await bare.close();
    await stack.stop();
  }
}
