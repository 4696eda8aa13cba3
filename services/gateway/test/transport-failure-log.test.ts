import { Writable } from 'node:stream';
import { createLogger } from '@imagegen/platform';
import { expect, it } from 'vitest';
import { freePort } from '../../../test/support/processes.js';
import { offlineContext } from '../scripts/openapi.js';
import { buildApp } from '../src/app.js';

/**
 * A 503 whose service call got no handler's answer (here: tenancy unreachable) is logged by the gateway with the
 * call and grpc-js's own words, so an operator can tell a dead replica from a refused connection or a deadline.
 */
it('a 503 from an unreachable service logs the gRPC method and what grpc-js said', async () => {
  const nobody = await freePort();
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  const logger = createLogger('gateway', 'warn', sink);
  const app = await buildApp(offlineContext('gateway', { env: { TENANCY_ADDR: `127.0.0.1:${nobody}` }, logger }));
  try {
    const r = await app.inject({ method: 'GET', url: '/api/images', headers: { 'x-api-key': `sk_live_${'a'.repeat(40)}` } });
    expect(r.statusCode).toBe(503);
    expect(r.headers['retry-after']).toBeDefined();
    expect(r.json()).toMatchObject({ error: 'Service temporarily unavailable' });
    const logged = lines.find((l) => l.msg === 'service call failed without an answer');
    expect(logged, JSON.stringify(lines)).toBeDefined();
    expect(logged?.grpc).toMatchObject({
      method: '/imagegen.tenancy.v1.TenancyService/AuthenticateApiKey',
      code: 'UNAVAILABLE',
      details: expect.stringContaining('ECONNREFUSED'),
    });
  } finally {
    await app.close();
  }
}, 30_000);
