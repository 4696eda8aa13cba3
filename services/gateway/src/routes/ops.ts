import { readFileSync } from 'node:fs';
import { buildInfo, grpcReadinessCheck, lifecycle, metricsText, setReadyGauge } from '@imagegen/platform';
import type { RouteModule } from '../types.js';

/** The event catalogue (AsyncAPI 3.0, docs/asyncapi.yaml): served next to the OpenAPI document. */
const ASYNCAPI_FILE = new URL('../../../../docs/asyncapi.yaml', import.meta.url);
function readAsyncApi(): Buffer | undefined {
  try {
    return readFileSync(ASYNCAPI_FILE);
  } catch {
    return undefined;
  }
}

/**
 * Operations endpoints of the gateway (the other services get the same paths from runStandalone's ops
 * server): GET /metrics (Prometheus), GET /livez (the process answers), GET /readyz (not shutting
 * down and the tenancy service, needed by every authenticated request, is ready: its gRPC Probe/Ready,
 * i.e. its database answers; a tenancy without that method counts as ready when it answers at all).
 * Unauthenticated, hidden from the OpenAPI document; not traced (telemetry.ts UNTRACED_PATHS). Also the event
 * catalogue, GET /docs/asyncapi.yaml (AsyncAPI 3.0), next to the OpenAPI document at /docs/json.
 */
const opsRoutes: RouteModule = (app, { ctx }) => {
  const route = { config: { auth: 'none' as const }, schema: { hide: true } };

  let cached: { at: number; ready: boolean; reason?: string } | undefined;
  const tenancyReady = grpcReadinessCheck(() => ctx.resolve('tenancy'), 1000);
  const readiness = async (): Promise<{ ready: boolean; reason?: string }> => {
    if (lifecycle.stopping) return { ready: false, reason: 'shutting down' };
    if (cached && Date.now() - cached.at < 1000) return cached;
    let result: { ready: boolean; reason?: string };
    try {
      const ok = await tenancyReady();
      result = ok ? { ready: true } : { ready: false, reason: 'tenancy service unavailable' };
    } catch (err) {
      result = { ready: false, reason: (err as Error).message };
    }
    cached = { at: Date.now(), ...result };
    return result;
  };

  // Metrics are for in-cluster scrapers, which reach the pod directly: a request that came through a
  // proxy or the Ingress (forwarding headers) gets 404, so the numbers are not published to the world.
  app.get('/metrics', route, async (req, reply) => {
    const h = req.headers;
    if (h['x-forwarded-for'] || h.forwarded || h['x-real-ip']) {
      return reply.status(404).send({ error: 'Route GET /metrics not found' });
    }
    const m = await metricsText();
    return reply.header('content-type', m.contentType).header('cache-control', 'no-store').send(m.body);
  });

  const asyncapi = readAsyncApi();
  app.get('/docs/asyncapi.yaml', { config: { auth: 'none' }, schema: { hide: true } }, async (_req, reply) => {
    if (!asyncapi) return reply.status(404).send({ error: 'Route not found', details: ['the event catalogue is not installed'] });
    return reply.type('application/yaml; charset=utf-8').header('cache-control', 'public, max-age=300').send(asyncapi);
  });

  app.get('/livez', route, async () => ({ status: 'ok', timestamp: new Date().toISOString(), ...buildInfo() }));

  app.get('/readyz', route, async (_req, reply) => {
    const r = await readiness();
    setReadyGauge(r.ready);
    return reply
      .status(r.ready ? 200 : 503)
      .header('cache-control', 'no-store')
      .send(r.ready ? { status: 'ready' } : { status: 'not_ready', reason: r.reason });
  });
};

export default opsRoutes;
