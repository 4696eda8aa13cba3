import Fastify from 'fastify';
import { startTestStack } from '../support/stack.js';
import { fmt, load } from './util.js';

/**
 * Issue 3 benchmark: a bare fastify hello-world against authenticated GET /api/profile through
 * gateway -> gRPC -> PostgreSQL, same process, same load. Target: profile >= 35% of bare req/s, p99 < 15 ms at 50 connections.
 */
export async function benchGateway(durationSec = Number(process.env.BENCH_SECONDS ?? 10)): Promise<void> {
  const bare = Fastify();
  bare.get('/', async () => ({ hello: 'world' }));
  const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
  const baseline = await load(bareUrl, { connections: 50, durationSec });
  await bare.close();

  const stack = await startTestStack();
  try {
    const tenant = await stack.createTenant({ rate_limit_per_minute: 100_000_000 });
    const profile = await load(`${stack.baseUrl}/api/profile`, { connections: 50, durationSec, headers: { 'x-api-key': tenant.liveKey } });
    const ratio = profile.reqPerSec / baseline.reqPerSec;
    console.log('\n== gateway: authenticated GET /api/profile vs bare fastify (50 connections) ==');
    console.log(`bare fastify     ${fmt(baseline.reqPerSec, 0)} req/s  p50 ${baseline.p50} ms  p99 ${baseline.p99} ms`);
    console.log(`GET /api/profile ${fmt(profile.reqPerSec, 0)} req/s  p50 ${profile.p50} ms  p99 ${profile.p99} ms  non-2xx ${profile.non2xx}`);
    console.log(`ratio            ${fmt(ratio * 100)}% of bare (target >= 35%), p99 ${profile.p99} ms (target < 15 ms)`);
  } finally {
    await stack.stop();
  }
}
