import type { Clients } from '@imagegen/operations';
import { rateLimitNamespace } from '@imagegen/operations';
import { type Config, dependencyUnavailable, type Logger, type ObjectStorage, type Principal, redisClient } from '@imagegen/platform';
import type { TenantDataClients, TenantDataServiceName } from './clients.js';

/**
 * A tenant's purge (issue 40, item 4), for a super_admin, after the tenant was deactivated. Steps, in order:
 * each owning service removes its rows (and the library its objects: originals, thumbnails, product files,
 * pending and scheduled ones) through TenantDataService.PurgeTenantData; the export ZIPs are removed; the oauth
 * service removes the tenant's grants, sessions and tokens; the Redis keys that name the tenant or its API keys
 * (rate limits, idempotency records, concurrency slots, request-signature replay keys) are removed; last,
 * tenancy removes its rows and the tenant itself, writing TenantChanged in the same transaction, the event every
 * replica's caches (gateway, mcp, generation, usage, oauth) already drop a tenant on (a deactivation's path).
 *
 * Durable and resumable: tenancy records the purge's start and each step's result on the tenant row
 * (BeginTenantPurge, RecordTenantPurgeStep), and a tenant whose purge started can no longer be activated. Every
 * step is idempotent (it removes what is left), so a purge cut short anywhere is finished by sending it again;
 * each step runs again on a rerun, which also catches what an in-flight request wrote after the deactivation.
 * The tenant row goes last, so until the end the purge can be found and resumed. Only the audit records are
 * left; no billing total is kept (the export carries them; the purge's audit record says what was removed).
 */

export interface PurgeDeps {
  clients: Clients;
  data: TenantDataClients;
  storage: ObjectStorage;
  config: Config;
  logger: Logger;
  /** The oauth service's internal base URL. */
  resolveOAuth: () => string;
}

export interface PurgeResult {
  tenantId: string;
  status: 'purged';
  startedAt: string;
  completedAt: string;
  rowsRemoved: Record<string, number>;
  objectsRemoved: number;
  redisKeysRemoved: number;
  kept: string[];
}

interface StepResult {
  rows?: Record<string, number>;
  objects?: number;
  redisKeys?: number;
}

const SERVICE_STEPS: TenantDataServiceName[] = ['webhooks', 'generation', 'usage', 'library'];

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

async function exportRowsAll(
  data: TenantDataClients,
  service: TenantDataServiceName,
  table: string,
  tenantId: string,
  principal: Principal,
) {
  const out: Record<string, unknown>[] = [];
  let after = '';
  for (;;) {
    const page = await data[service].exportRows({ tenantId, table, after, limit: 1000 }, principal);
    for (const r of page.rows) out.push(JSON.parse(r));
    if (!page.nextAfter) return out;
    after = page.nextAfter;
  }
}

/** Removes every Redis key of the deployment that names the tenant or one of its API keys. */
async function purgeRedis(config: Config, tenantId: string, keyIds: string[], logger: Logger): Promise<number> {
  if (!config.redisUrl) return 0; // in-process stores: per process, expiring within their window
  const redis = redisClient(config.redisUrl, 'gateway-purge');
  redis.on('error', (err) => logger.debug({ err }, 'purge redis error'));
  try {
    const namespaces = [...new Set([`${config.eventsPrefix}:`, rateLimitNamespace(config)])];
    const patterns = namespaces.map((ns) => `${globEscape(ns)}*${globEscape(tenantId)}*`);
    for (const keyId of keyIds) patterns.push(`${globEscape(config.eventsPrefix)}:sig:${globEscape(keyId)}:*`);
    let removed = 0;
    for (const match of patterns) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        if (keys.length) removed += await redis.unlink(...keys);
      } while (cursor !== '0');
    }
    return removed;
  } catch (err) {
    logger.warn({ err }, 'purge: Redis could not be reached');
    throw dependencyUnavailable();
  } finally {
    redis.disconnect();
  }
}

export async function runPurge(deps: PurgeDeps, tenantId: string, principal: Principal): Promise<PurgeResult> {
  const tenancy = deps.clients.tenancy;
  const begun = await tenancy.beginTenantPurge({ tenantId }, principal);
  const previous = JSON.parse(begun.stepsJson || '{}') as Record<string, StepResult>;
  const record = async (step: string, r: StepResult) => {
    // A rerun adds what it removed to what the earlier runs did.
    const p = previous[step] ?? {};
    const rows = { ...(p.rows ?? {}) };
    for (const [t, n] of Object.entries(r.rows ?? {})) rows[t] = (rows[t] ?? 0) + n;
    const merged = { rows, objects: (p.objects ?? 0) + (r.objects ?? 0), redisKeys: (p.redisKeys ?? 0) + (r.redisKeys ?? 0) };
    previous[step] = merged;
    await tenancy.recordTenantPurgeStep({ tenantId, step, resultJson: JSON.stringify(merged) }, principal);
  };
  const prefixed = (schema: string, rows: Record<string, number>) =>
    Object.fromEntries(Object.entries(rows).map(([t, n]) => [`${schema}.${t}`, n]));

  // What the later steps need of tenancy's rows, read while they exist (a rerun reads what is left).
  const keyIds = (await exportRowsAll(deps.data, 'tenancy', 'api_keys', tenantId, principal)).map((k) => String(k.key_id));

  for (const service of SERVICE_STEPS) {
    const r = await deps.data[service].purgeTenantData({ tenantId }, principal);
    const schema = service === 'usage' ? 'usage' : service;
    await record(service, { rows: prefixed(schema, r.rowsRemoved), objects: r.objectsRemoved });
  }

  const exports = await exportRowsAll(deps.data, 'tenancy', 'tenant_exports', tenantId, principal);
  const zipKeys = exports.map((e) => String(e.object_key));
  await deps.storage.deleteMany(zipKeys);
  await record('exports', { objects: zipKeys.length });

  const res = await fetch(`${deps.resolveOAuth()}/_internal/purge-tenant`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tenant_id: tenantId }),
    signal: AbortSignal.timeout(30_000),
  }).catch(() => undefined);
  if (!res?.ok) throw dependencyUnavailable();
  const oauth = (await res.json()) as { rows_removed: Record<string, number> };
  await record('oauth', { rows: prefixed('oauth', oauth.rows_removed) });

  await record('redis', { redisKeys: await purgeRedis(deps.config, tenantId, keyIds, deps.logger) });

  // Last: tenancy's rows and the tenant itself (TenantChanged: every replica drops its cached credentials).
  const last = await deps.data.tenancy.purgeTenantData({ tenantId }, principal);
  const rowsRemoved: Record<string, number> = prefixed('tenancy', last.rowsRemoved);
  let objectsRemoved = 0;
  let redisKeysRemoved = 0;
  for (const r of Object.values(previous)) {
    for (const [t, n] of Object.entries(r.rows ?? {})) rowsRemoved[t] = (rowsRemoved[t] ?? 0) + n;
    objectsRemoved += r.objects ?? 0;
    redisKeysRemoved += r.redisKeys ?? 0;
  }
  return {
    tenantId,
    status: 'purged',
    startedAt: begun.startedAt,
    completedAt: new Date().toISOString(),
    rowsRemoved,
    objectsRemoved,
    redisKeysRemoved,
    kept: ['tenancy.audit_log'],
  };
}
