import { recordSessionJsonCache } from '@imagegen/platform';

/**
 * The session detail's images as rendered JSON, kept per session while its images do not change (issue 16 item 4).
 *
 * A full session renders to about 750 KB in 10-20 ms of PostgreSQL; a client polling a session's detail asks for
 * the same bytes again and again. Each entry carries the session's `images_version` read in the same statement as
 * its JSON (migration 280: every insert or delete of the session's images moves it, and a value is never reused), so
 * an entry is served only to a request that has just read that same version: never stale, whatever another
 * replica wrote. Bounded by bytes, least recently used out first. Per process: replicas each keep their own.
 */
export interface SessionJsonEntry {
  /** The session's images_version the JSON was rendered at (never '0', which is never cached). */
  version: string;
  json: Buffer;
}

export class SessionJsonCache {
  private readonly entries = new Map<string, SessionJsonEntry>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  private static key(tenantId: string, sessionId: string, urlPrefix: string): string {
    // NUL cannot occur in a tenant id, and session ids refuse control characters (validateSessionId).
    return `${tenantId}\0${sessionId}\0${urlPrefix}`;
  }

  /** Whether an entry exists for the session, whatever its version (worth reading the version first). */
  has(tenantId: string, sessionId: string, urlPrefix: string): boolean {
    return this.entries.has(SessionJsonCache.key(tenantId, sessionId, urlPrefix));
  }

  /** The JSON rendered at exactly `version`, counted as a hit or a miss. */
  get(tenantId: string, sessionId: string, urlPrefix: string, version: string): Buffer | undefined {
    const key = SessionJsonCache.key(tenantId, sessionId, urlPrefix);
    const e = this.entries.get(key);
    if (e === undefined || e.version !== version) {
      recordSessionJsonCache('miss');
      return undefined;
    }
    recordSessionJsonCache('hit');
    // Most recently used last: Map keeps insertion order.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.json;
  }

  set(tenantId: string, sessionId: string, urlPrefix: string, entry: SessionJsonEntry): void {
    if (entry.version === '0' || entry.json.length > this.maxBytes) return;
    const key = SessionJsonCache.key(tenantId, sessionId, urlPrefix);
    const old = this.entries.get(key);
    if (old !== undefined) {
      // Two renders of one session can finish out of order: keep the newer version.
      if (BigInt(old.version) > BigInt(entry.version)) return;
      this.bytes -= old.json.length;
      this.entries.delete(key);
    }
    this.entries.set(key, entry);
    this.bytes += entry.json.length;
    for (const [k, e] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= e.json.length;
    }
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}
