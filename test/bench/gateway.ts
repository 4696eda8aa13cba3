import Fastify from 'fastify';
import { startTestStack } from '../support/stack.js';
import { fmt, type LoadResult, load, machineLoad, median } from './util.js';

/**
 * Issue 3 benchmark: a bare fastify hello-world against authenticated GET /api/profile through
 * gateway -> gRPC -> PostgreSQL, same process, same load. Target: profile >= 35% of bare req/s, p99 < 15 ms at 50 connections.
 *
 * Both servers stay up and are loaded in alternation, BENCH_ROUNDS (default 3) rounds of BENCH_SECONDS
 * (default 5) each, after a warm-up; the medians are printed. The bench machine is shared: alternating keeps
 * a burst of someone else's load from landing on one side of the ratio only.
 */
export async function benchGateway(): Promise<void> {
  const durationSec = Number(process.env.BENCH_SECONDS ?? 5);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const connections = 50;
  const bare = Fastify();
  bare.get('/', async () => ({ hello: 'world' }));
  const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
  const stack = await startTestStack();
  try {
    const tenant = await stack.createTenant({ rate_limit_per_minute: 100_000_000 });
    const profileUrl = `${stack.baseUrl}/api/profile`;
    const headers = { 'x-api-key': tenant.liveKey };
    await load(bareUrl, { connections, durationSec: 2 }); // warm-up (JIT, connections, caches)
    await load(profileUrl, { connections, durationSec: 2, headers });
    const b: LoadResult[] = [];
    const p: LoadResult[] = [];
    const loads: string[] = [];
    for (let i = 0; i < rounds; i++) {
      loads.push(machineLoad());
      b.push(await load(bareUrl, { connections, durationSec }));
      p.push(await load(profileUrl, { connections, durationSec, headers }));
    }
    const med = (rs: LoadResult[], k: keyof LoadResult) => median(rs.map((r) => r[k]));
    const ratio = median(p.map((r, i) => r.reqPerSec / b[i].reqPerSec));
    console.log(
      `\n== gateway: authenticated GET /api/profile vs bare fastify (${connections} connections, ${rounds} x ${durationSec} s alternating) ==`,
    );
    console.log(`machine          ${loads.join(', ')}`);
    console.log(
      `bare fastify     ${fmt(med(b, 'reqPerSec'), 0)} req/s  p50 ${med(b, 'p50')} ms  p99 ${med(b, 'p99')} ms  (rounds: ${b.map((r) => fmt(r.reqPerSec, 0)).join(', ')})`,
    );
    console.log(
      `GET /api/profile ${fmt(med(p, 'reqPerSec'), 0)} req/s  p50 ${med(p, 'p50')} ms  p99 ${med(p, 'p99')} ms  non-2xx ${p.reduce((a, r) => a + r.non2xx, 0)}  (rounds: ${p.map((r) => fmt(r.reqPerSec, 0)).join(', ')})`,
    );
    console.log(`ratio            ${fmt(ratio * 100)}% of bare (target >= 35%), p99 ${med(p, 'p99')} ms (target < 15 ms)`);
  } finally {
    await stack.stop();
    await bare.close();
  }
}
