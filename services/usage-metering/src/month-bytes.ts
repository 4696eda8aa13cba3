import type { Sql } from '@imagegen/platform';
import { monthBytes } from './store.js';

/**
 * The bytes a tenant stored in a month, as CheckQuota compares them with the quota, without a query per
 * generate: read from usage_months at most once per `ttlMs` per tenant and month, and raised at once by this
 * replica's own usage updates (applyEvents returns the month totals it wrote). A month's total_bytes only
 * grows, so of two readings the larger is the later one. Another replica's updates show within `ttlMs`, the
 * lifetime of the cached quota itself (USAGE_TENANT_CACHE_MS): a quota decision is never older than that.
 */
export class MonthBytesCache {
  private readonly known = new Map<string, { bytes: number; at: number }>();
  private readonly loading = new Map<string, Promise<number>>();

  constructor(
    private readonly sql: Sql,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(tenantId: string, month: string): Promise<number> {
    if (this.ttlMs <= 0) return monthBytes(this.sql, tenantId, month);
    const key = keyOf(tenantId, month);
    const k = this.known.get(key);
    if (k && Date.now() - k.at < this.ttlMs) return Promise.resolve(k.bytes);
    let load = this.loading.get(key);
    if (!load) {
      load = monthBytes(this.sql, tenantId, month)
        .then((bytes) => this.raise(key, bytes))
        .finally(() => this.loading.delete(key));
      this.loading.set(key, load);
    }
    return load;
  }

  /** Totals this replica just committed (tenant|month -> total_bytes, as applyEvents answers them). */
  applied(totals: Map<string, number>): void {
    if (this.ttlMs <= 0) return;
    for (const [key, bytes] of totals) this.raise(key, bytes);
  }

  private raise(key: string, bytes: number): number {
    const now = Date.now();
    const k = this.known.get(key);
    const value = Math.max(bytes, k?.bytes ?? 0);
    this.known.delete(key); // re-inserted last: the oldest entries are the first dropped below
    this.known.set(key, { bytes: value, at: now });
    if (this.known.size > this.maxEntries) {
      for (const [k2, v] of this.known) if (now - v.at >= this.ttlMs) this.known.delete(k2);
      if (this.known.size > this.maxEntries) this.known.delete(this.known.keys().next().value as string);
    }
    return value;
  }
}

const keyOf = (tenantId: string, month: string) => `${tenantId}|${month}`;
