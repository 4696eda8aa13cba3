/**
 * A short-lived cache of lookups from another service: each key's answer is kept `ttlMs` from when it was
 * asked, concurrent gets of a key share one load, failed loads are not kept. For data whose changes may apply
 * a few seconds late (tenant settings, provider keys), read on every request otherwise. At most `maxEntries`
 * keys (expired ones are dropped first, then the oldest).
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, { at: number; value: Promise<V> }>();
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: K, load: (key: K) => Promise<V>): Promise<V> {
    if (this.ttlMs <= 0) return load(key);
    const now = Date.now();
    const e = this.entries.get(key);
    if (e && now - e.at < this.ttlMs) return e.value;
    const value = load(key);
    this.entries.delete(key);
    this.entries.set(key, { at: now, value });
    value.catch(() => this.entries.get(key)?.value === value && this.entries.delete(key));
    if (this.entries.size > this.maxEntries) {
      for (const [k, v] of this.entries) if (now - v.at >= this.ttlMs) this.entries.delete(k);
      if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as K);
    }
    return value;
  }

  invalidate(key: K): void {
    this.entries.delete(key);
  }
}
