import { AppError, type Client, createClient, type ServiceName } from '@imagegen/platform';

import type { RouteModule } from '../types.js';

/**
 * A method no service implements: the server answers UNIMPLEMENTED, which proves the gRPC channel
 * works without touching any data. UNAVAILABLE / DEADLINE_EXCEEDED (503 / 504) mean down.
 */
const PROBE = {
  probe: {
    path: '/imagegen.health.v1.Probe/Ping',
    requestStream: false,
    responseStream: false,
    requestSerialize: (_: object) => Buffer.alloc(0),
    requestDeserialize: (_: Buffer) => ({}),
    responseSerialize: (_: object) => Buffer.alloc(0),
    responseDeserialize: (_: Buffer) => ({}),
  },
} as const;

const GRPC_SERVICES: ServiceName[] = ['tenancy', 'library', 'generation', 'usage', 'webhooks'];
const HTTP_SERVICES: ServiceName[] = ['oauth', 'mcp'];
const PROBE_TIMEOUT_MS = 1500;

interface ServiceHealth {
  name: string;
  status: 'up' | 'down' | 'not_configured';
  latencyMs: number | null;
  error?: string;
}

/**
 * GET /admin/stats (any admin). Tenants from tenancy; images, storage, recent activity and top tenants
 * from usage GetPlatformUsage (usage.status 'unavailable' and nulls when that call fails); health of
 * every known service by a gRPC channel probe (or an HTTP request for oauth and mcp).
 */
const adminStats: RouteModule = (app, { ctx, clients }) => {
  const tenancy = clients.tenancy;
  const usage = clients.usage;
  const probes = new Map<ServiceName, Client<typeof PROBE>>();

  async function probeGrpc(name: ServiceName): Promise<ServiceHealth> {
    try {
      ctx.resolve(name);
    } catch {
      return { name, status: 'not_configured', latencyMs: null };
    }
    let client = probes.get(name);
    if (!client) {
      client = createClient(PROBE as never, () => ctx.resolve(name)) as Client<typeof PROBE>;
      probes.set(name, client);
    }
    const started = performance.now();
    try {
      await client.probe({}, { requestId: `health-${name}`, source: 'gateway' }, { timeoutMs: PROBE_TIMEOUT_MS });
    } catch (err) {
      if (err instanceof AppError && (err.status === 503 || err.status === 504)) {
        return { name, status: 'down', latencyMs: null, error: err.body.error };
      }
    }
    return { name, status: 'up', latencyMs: Math.round(performance.now() - started) };
  }

  async function probeHttp(name: ServiceName): Promise<ServiceHealth> {
    let url: string;
    try {
      url = ctx.resolve(name);
    } catch {
      return { name, status: 'not_configured', latencyMs: null };
    }
    const started = performance.now();
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS), redirect: 'manual' });
      await res.body?.cancel();
      return { name, status: 'up', latencyMs: Math.round(performance.now() - started) };
    } catch (err) {
      return { name, status: 'down', latencyMs: null, error: (err as Error).message };
    }
  }

  app.get('/admin/stats', async (req) => {
    const [tenantStats, platform, health] = await Promise.all([
      tenancy.getTenantStats({}, req.principal),
      usage.getPlatformUsage({}, req.principal, { timeoutMs: 5000 }).then(
        (u) => ({ ok: true as const, u }),
        (err: unknown) => ({ ok: false as const, error: err instanceof AppError ? err.body.error : String(err) }),
      ),
      Promise.all([...GRPC_SERVICES.map(probeGrpc), ...HTTP_SERVICES.map(probeHttp)]),
    ]);
    const names = new Map(tenantStats.tenantNames.map((t) => [t.tenantId, t.tenantName]));
    const mb = (bytes: number) => Math.round((bytes / (1024 * 1024)) * 100) / 100;
    const services = [{ name: 'gateway', status: 'up' as const, latencyMs: 0 }, ...health];
    const down = services.filter((s) => s.status === 'down').length;
    return {
      data: {
        tenants: {
          total: tenantStats.total,
          active: tenantStats.active,
          inactive: tenantStats.inactive,
          createdLast30Days: tenantStats.createdLast30d,
        },
        images: platform.ok ? { total: platform.u.totalImages, last24h: platform.u.imagesLast24h } : null,
        storage: platform.ok ? { totalBytes: platform.u.totalBytes, totalMb: mb(platform.u.totalBytes) } : null,
        recentActivity: platform.ok ? { imagesLast24h: platform.u.imagesLast24h, operationsLast24h: platform.u.operationsLast24h } : null,
        topTenants: platform.ok
          ? platform.u.topTenants.map((t) => ({
              tenantId: t.tenantId,
              tenantName: names.get(t.tenantId) ?? null,
              bytes: t.bytes,
              mb: mb(t.bytes),
              images: t.images,
            }))
          : [],
        usage: platform.ok ? { status: 'ok' } : { status: 'unavailable', error: platform.error },
        health: { status: down === 0 ? 'ok' : 'degraded', services },
        generatedAt: new Date().toISOString(),
      },
    };
  });
};

export default adminStats;
