import { type Sql, TtlCache } from '@imagegen/platform';
import { monthBytes } from './store.js';

/**
 * The bytes a tenant stored in a month, as CheckQuota compares them with the quota, without a query per
 * generate: read from usage_months at most once per `ttlMs` per tenant and month, and raised at once by this
 * replica's own usage updates (applyEvents returns the month totals it wrote). A month's total_bytes only
 * grows, so of two readings the larger is the later one. Another replica's updates show within `ttlMs`, the
 * lifetime of the cached quota itself (USAGE_TENANT_CACHE_MS): a quota decision is never older than that.
 */
export class MonthBytesCache {
  private readonly cache: TtlCache<string, number>;

  constructor(
    private readonly sql: Sql,
    ttlMs: number,
    maxEntries = 10_000,
  ) {
    this.cache = new TtlCache(ttlMs, maxEntries);
  }

  get(tenantId: string, month: string): Promise<number> {
    return this.cache.get(keyOf(tenantId, month), () => monthBytes(this.sql, tenantId, month));
  }

  /** Totals this replica just committed (tenant|month -> total_bytes, as applyEvents answers them). */
  applied(totals: Map<string, number>): void {
    for (const [key, bytes] of totals) {
      // The larger of the two: a batch that committed earlier may report after a later one, or a read be in flight.
      this.cache.update(key, (current) =>
        (current ?? Promise.resolve(0)).then(
          (known) => Math.max(known, bytes),
          () => bytes,
        ),
      );
    }
  }
}

const keyOf = (tenantId: string, month: string) => `${tenantId}|${month}`;
