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
    const e = this.entries.get(key);
    if (e && Date.now() - e.at < this.ttlMs) return e.value;
    return this.put(key, load(key));
  }

  /**
   * Replaces a key's answer with one made from its current one (undefined when none is kept; expired or still
   * loading, it is passed as it is), with a fresh lifetime: for news of a change that arrives without a lookup.
   * Nothing is kept when the cache keeps nothing (ttlMs <= 0).
   */
  update(key: K, next: (current: Promise<V> | undefined) => Promise<V>): void {
    if (this.ttlMs <= 0) return;
    this.put(key, next(this.entries.get(key)?.value));
  }

  invalidate(key: K): void {
    this.entries.delete(key);
  }

  private put(key: K, value: Promise<V>): Promise<V> {
    const now = Date.now();
    this.entries.delete(key); // re-inserted last: the oldest entries are the first dropped below
    this.entries.set(key, { at: now, value });
    value.catch(() => this.entries.get(key)?.value === value && this.entries.delete(key));
    if (this.entries.size > this.maxEntries) {
      for (const [k, v] of this.entries) if (now - v.at >= this.ttlMs) this.entries.delete(k);
      if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as K);
    }
    return value;
  }
}
