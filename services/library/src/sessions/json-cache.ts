import type { SessionImagesJson } from '../images/store.js';

/**
 * The session detail's images as rendered JSON, kept per session (issue 16 item 4).
 *
 * A full session renders to about 750 KB, most of its read's time in PostgreSQL (docs/BENCHMARKS.md); a client polling
 * a session's detail asks for the same bytes again and again, or for the same images and one more. Each entry carries
 * the session's `images_version` read in the same statement as its images (migration 280: every insert or delete of the
 * session's images moves it, and a value is never reused), so an entry is served whole only to a request that has just
 * read that same version: never stale, whatever another replica wrote. When the version moved, the entry's images are
 * not rendered again: only their keys are read (id and xmin, so a row updated in place is rendered again), and the new
 * ones rendered (assembleSessionJson). A session read for the first time is rendered whole, in one value (the cheapest
 * way), and keyed image by image from its first change on. Bounded by bytes, least recently used out first. Per
 * process: replicas each keep their own.
 */
export interface SessionJsonEntry {
  /** The session's images_version the JSON was rendered at (never '0', which is never kept). */
  version: string;
  /** The JSON array of the session's images. */
  json: Buffer;
  /**
   * Each image's JSON object, by its row key (SessionImagesJson): views into `json`. Absent when the JSON was
   * rendered whole (a session not kept before): its next change then renders every image once more, with keys.
   */
  parts?: Map<string, Buffer>;
}

const OPEN = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']');
/** What an entry's per-image map costs beside its JSON (key string, view object, map slot), counted in the bound. */
const PART_OVERHEAD_BYTES = 160;
const entryBytes = (e: SessionJsonEntry) => e.json.length + (e.parts?.size ?? 0) * PART_OVERHEAD_BYTES;

/**
 * The JSON array of `rendered`'s images in their order: each new image's JSON as PostgreSQL rendered it, each known
 * one (json null) from `known`. Undefined when a known key is missing from `known` (the caller renders all).
 */
export function assembleSessionJson(rendered: SessionImagesJson, known?: SessionJsonEntry): SessionJsonEntry | undefined {
  const pieces: Buffer[] = [OPEN];
  const keys: string[] = [];
  for (const image of rendered.images) {
    const part = image.json ?? known?.parts?.get(image.key);
    if (part === undefined) return undefined;
    if (keys.length > 0) pieces.push(COMMA);
    pieces.push(part);
    keys.push(image.key);
  }
  pieces.push(CLOSE);
  const json = Buffer.concat(pieces);
  const parts = new Map<string, Buffer>();
  let at = OPEN.length;
  for (let i = 0; i < keys.length; i++) {
    const length = pieces[1 + 2 * i].length;
    parts.set(keys[i], json.subarray(at, at + length));
    at += length + COMMA.length;
  }
  return { version: rendered.version, json, parts };
}

export class SessionJsonCache {
  private readonly entries = new Map<string, SessionJsonEntry>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  private static key(tenantId: string, sessionId: string, urlPrefix: string): string {
    // NUL cannot occur in a tenant id, and session ids refuse control characters (validateSessionId).
    return `${tenantId}\0${sessionId}\0${urlPrefix}`;
  }

  /** The session's entry at whatever version (its images known), without counting a read. */
  peek(tenantId: string, sessionId: string, urlPrefix: string): SessionJsonEntry | undefined {
    return this.entries.get(SessionJsonCache.key(tenantId, sessionId, urlPrefix));
  }

  /** The JSON rendered at exactly `version` (a read: it becomes the most recently used). */
  get(tenantId: string, sessionId: string, urlPrefix: string, version: string): Buffer | undefined {
    const key = SessionJsonCache.key(tenantId, sessionId, urlPrefix);
    const e = this.entries.get(key);
    if (e === undefined || e.version !== version) return undefined;
    // Most recently used last: Map keeps insertion order.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.json;
  }

  set(tenantId: string, sessionId: string, urlPrefix: string, entry: SessionJsonEntry): void {
    const size = entryBytes(entry);
    if (entry.version === '0' || size > this.maxBytes) return;
    const key = SessionJsonCache.key(tenantId, sessionId, urlPrefix);
    const old = this.entries.get(key);
    if (old !== undefined) {
      // Two renders of one session can finish out of order: keep the newer version.
      if (BigInt(old.version) > BigInt(entry.version)) return;
      this.bytes -= entryBytes(old);
      this.entries.delete(key);
    }
    this.entries.set(key, entry);
    this.bytes += size;
    for (const [k, e] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= entryBytes(e);
    }
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}
