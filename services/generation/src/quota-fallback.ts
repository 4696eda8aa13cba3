import type { CheckQuotaResponse } from '@imagegen/contracts/usage/v1/usage';
import { durationFromEnv, type Logger, type Principal } from '@imagegen/platform';
import type { Collaborators } from './deps.js';

/**
 * Quota checks that survive a usage-metering outage. Every successful check remembers the tenant's month
 * usage and quota. When usage-metering cannot answer (503/504: down, restarting, unreachable), a tenant
 * checked successfully within the last `maxStaleMs` is answered from that figure plus the bytes this process
 * has admitted since, with the same rule as usage-metering (refused once used >= quota). Tenants with no
 * recent figure are refused with the original 503, as before.
 *
 * Largest overshoot (README): each generation process admits at most what was left of the quota at its last
 * successful check, plus the one request that crosses it; with R processes, at most R times that remaining
 * amount in all, within `maxStaleMs` of the outage's start.
 */
export const QUOTA_FALLBACK_MS = durationFromEnv('QUOTA_FALLBACK_MS', 300_000);

interface Known {
  usedBytes: number;
  quotaBytes: number;
  at: number;
  /** Bytes admitted from this figure while usage-metering was unreachable. */
  admittedSince: number;
}

const isOutage = (err: unknown) => {
  const status = (err as { status?: number }).status;
  return status === 503 || status === 504;
};

export function withQuotaFallback(
  c: Collaborators,
  opts: { logger: Logger; maxStaleMs?: number; now?: () => number },
): Collaborators & { fallbackAnswers(): number } {
  const maxStale = opts.maxStaleMs ?? QUOTA_FALLBACK_MS;
  const now = opts.now ?? Date.now;
  const known = new Map<string, Known>();
  let fallbacks = 0;
  const checkQuota = async (p: Principal, tenantId: string, incomingBytes: number): Promise<Pick<CheckQuotaResponse, 'allowed'>> => {
    try {
      const r = (await c.checkQuota(p, tenantId, incomingBytes)) as Partial<CheckQuotaResponse> & { allowed: boolean };
      if (typeof r.usedBytes === 'number' && typeof r.quotaBytes === 'number') {
        known.set(tenantId, { usedBytes: r.usedBytes, quotaBytes: r.quotaBytes, at: now(), admittedSince: 0 });
      }
      return r;
    } catch (err) {
      const k = known.get(tenantId);
      if (!isOutage(err) || !k || now() - k.at > maxStale) throw err;
      const allowed = k.usedBytes + k.admittedSince < k.quotaBytes;
      if (allowed) k.admittedSince += Math.max(0, incomingBytes);
      fallbacks++;
      opts.logger.warn(
        { tenantId, ageMs: now() - k.at, usedBytes: k.usedBytes + k.admittedSince, quotaBytes: k.quotaBytes, allowed },
        'usage-metering unavailable: quota answered from the last known usage',
      );
      return { allowed };
    }
  };
  // c is a plain object of functions (grpcCollaborators), so spreading it keeps every other call as is.
  return { ...c, checkQuota, fallbackAnswers: () => fallbacks };
}
