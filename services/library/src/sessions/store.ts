import { randomUUID } from 'node:crypto';
import { badRequest, invalidPayload, notFound, type Sql, type TransactionSql } from '@imagegen/platform';
import { decodeTextCursor, encodeCursor, SESSION_SORT } from '../images/cursor.js';
import { TOTAL_CAP } from '../images/list-query.js';

/** SPEC 8: at most 1,000 images per session; session ids are 1-200 characters. */
export const MAX_IMAGES_PER_SESSION = 1000;
export const MAX_SESSION_ID_LENGTH = 200;

export function newSessionId(): string {
  return `session_${randomUUID()}`;
}

export function validateSessionId(sessionId: string, field = 'session_id'): string {
  if (typeof sessionId !== 'string' || sessionId.length < 1 || sessionId.length > MAX_SESSION_ID_LENGTH) {
    throw invalidPayload([`${field} must be between 1 and ${MAX_SESSION_ID_LENGTH} characters`]);
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters on purpose
  if (/[\u0000-\u001f\u007f]/.test(sessionId)) throw invalidPayload([`${field} must not contain control characters`]);
  return sessionId;
}

export const sessionFullError = (sessionId: string, imageCount: number) =>
  badRequest('Session image limit reached', {
    sessionId,
    limit: MAX_IMAGES_PER_SESSION,
    imageCount,
    message: `A session holds at most ${MAX_IMAGES_PER_SESSION} images; use a new session id`,
  });

export interface SessionRow {
  tenantId: string;
  sessionId: string;
  isActive: boolean;
  imageCount: number;
  createdAt: Date;
  lastActivityAt: Date;
}

export interface SessionSummaryRow extends SessionRow {
  totalImages: number;
  totalEdits: number;
  totalBytes: number;
  totalTokens: number;
}

function sessionFromDb(r: Record<string, unknown>): SessionRow {
  return {
    tenantId: r.tenant_id as string,
    sessionId: r.session_id as string,
    isActive: Boolean(r.is_active),
    imageCount: Number(r.image_count),
    createdAt: r.created_at as Date,
    lastActivityAt: r.last_activity_at as Date,
  };
}

/**
 * Creates the session when absent, marks activity and returns it, holding its row lock until the
 * transaction ends (so concurrent stores into one session count correctly).
 */
export async function lockSession(tx: TransactionSql, tenantId: string, sessionId: string): Promise<SessionRow & { created: boolean }> {
  const [r] = await tx`
    INSERT INTO sessions (tenant_id, session_id) VALUES (${tenantId}, ${sessionId})
    ON CONFLICT (tenant_id, session_id) DO UPDATE SET last_activity_at = now()
    RETURNING tenant_id, session_id, is_active, image_count, created_at, last_activity_at, (xmax = 0) AS created`;
  return { ...sessionFromDb(r as Record<string, unknown>), created: Boolean((r as Record<string, unknown>).created) };
}

/** Adjusts the image count after an image was added (+1) or removed (-1); is_active follows the capacity. */
export async function adjustSessionCount(tx: TransactionSql, tenantId: string, sessionId: string, delta: number): Promise<void> {
  await tx`
    UPDATE sessions SET image_count = GREATEST(image_count + ${delta}, 0),
      is_active = GREATEST(image_count + ${delta}, 0) < ${MAX_IMAGES_PER_SESSION},
      last_activity_at = CASE WHEN ${delta} > 0 THEN now() ELSE last_activity_at END
    WHERE tenant_id = ${tenantId} AND session_id = ${sessionId}`;
}

export async function touchSession(sql: Sql, tenantId: string, sessionId: string) {
  validateSessionId(sessionId);
  // One statement needs no transaction around it (BEGIN/COMMIT were two round trips of every generate).
  const s = await lockSession(sql as unknown as TransactionSql, tenantId, sessionId);
  return { ...s, remaining: Math.max(MAX_IMAGES_PER_SESSION - s.imageCount, 0) };
}

/** Image count of a session without locking (a cheap pre-check before expensive work). */
export async function sessionImageCount(sql: Sql, tenantId: string, sessionId: string): Promise<number> {
  const [r] = await sql`SELECT image_count FROM sessions WHERE tenant_id = ${tenantId} AND session_id = ${sessionId}`;
  return r ? Number(r.image_count) : 0;
}

// The totals count listed images (not pending ones); kept in the row by triggers (migration 180), so a page of
// sessions reads no image rows.
const SUMMARY_SELECT = (sql: Sql) => sql`
  s.tenant_id, s.session_id, s.is_active, s.image_count, s.created_at, s.last_activity_at,
  s.total_images, s.total_edits, s.total_bytes, s.total_tokens`;

/** Object.assign, not a leading spread: V8's slow path for the latter cost microseconds per row (see present.ts). */
function summaryFromDb(r: Record<string, unknown>): SessionSummaryRow {
  return Object.assign(sessionFromDb(r), {
    totalImages: Number(r.total_images ?? 0),
    totalEdits: Number(r.total_edits ?? 0),
    totalBytes: Number(r.total_bytes ?? 0),
    totalTokens: Number(r.total_tokens ?? 0),
  } satisfies Partial<SessionSummaryRow>);
}

export interface SessionPageRequest {
  limit: number;
  offset: number;
  /** A previous page's nextCursor (not with offset). */
  cursor?: string;
}

/**
 * Sessions of a tenant, most recently active first (ties by session id), a page in the time of one page however
 * deep (issue 16): `cursor` continues after the last session of the previous page (keyset on the order, served by
 * sessions_tenant_activity), and the total is counted up to TOTAL_CAP + 1 sessions through the primary key
 * (`totalIsExact` false above TOTAL_CAP, `total` then a lower bound as in the image list). A session created while
 * paging comes before the cursor, so it neither repeats nor pushes older ones onto the next page (offset paging
 * does). A session that becomes active while paging moves to the top: it is not listed twice, but one not yet
 * reached is then passed over.
 */
export async function listSessions(sql: Sql, tenantId: string, page: SessionPageRequest, cursorKey: Buffer) {
  const cursor = page.cursor ? page.cursor : undefined;
  if (cursor !== undefined && page.offset) throw invalidPayload(['cursor and offset cannot be combined']);
  const at = cursor !== undefined ? decodeTextCursor(cursorKey, tenantId, SESSION_SORT, cursor) : undefined;
  const cols = () => sql`${SUMMARY_SELECT(sql)},
    to_char(s.last_activity_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS k`;
  const n = page.limit + 1;
  // After the cursor in (last_activity_at DESC, session_id ASC) order. The mixed directions rule out one row
  // comparison, and `<= v AND (< v OR id > ...)` walked every session tied at v before the position (a bulk insert
  // shares one now()): two range scans of sessions_tenant_activity instead, each reading at most a page.
  // `::text` first: a parameter typed timestamptz goes through a JS Date, which drops the microseconds.
  const rowsQuery = at
    ? sql`SELECT * FROM (
          (SELECT ${cols()} FROM sessions s
            WHERE s.tenant_id = ${tenantId} AND s.last_activity_at = ${at.value}::text::timestamptz AND s.session_id > ${at.id}
            ORDER BY s.session_id LIMIT ${n})
          UNION ALL
          (SELECT ${cols()} FROM sessions s WHERE s.tenant_id = ${tenantId} AND s.last_activity_at < ${at.value}::text::timestamptz
            ORDER BY s.last_activity_at DESC, s.session_id LIMIT ${n})
        ) p ORDER BY p.last_activity_at DESC, p.session_id LIMIT ${n}`
    : sql`SELECT ${cols()} FROM sessions s WHERE s.tenant_id = ${tenantId}
        ORDER BY s.last_activity_at DESC, s.session_id LIMIT ${n} OFFSET ${page.offset}`;
  const [rows, [count]] = await Promise.all([
    rowsQuery,
    // ORDER BY keeps the count on the primary key: a bare LIMIT could seq-scan a big table for a tenant's rows.
    sql`SELECT count(*)::int AS n FROM (
          SELECT 1 FROM sessions WHERE tenant_id = ${tenantId} ORDER BY session_id LIMIT ${TOTAL_CAP + 1}) capped`,
  ]);
  const more = rows.length > page.limit;
  const listed = rows.slice(0, page.limit) as unknown as Record<string, unknown>[];
  const counted = Number(count?.n ?? 0);
  const totalIsExact = counted <= TOTAL_CAP;
  const last = listed.at(-1);
  return {
    sessions: listed.map(summaryFromDb),
    total: totalIsExact ? counted : Math.max(TOTAL_CAP, page.offset + listed.length + (more ? 1 : 0)),
    totalIsExact,
    nextCursor:
      more && last
        ? encodeCursor(cursorKey, tenantId, { sort: SESSION_SORT, value: last.k as string, id: last.session_id as string })
        : undefined,
  };
}

/** A session with its images' version (migration 280), or 404. */
export async function getSession(sql: Sql, tenantId: string, sessionId: string): Promise<SessionSummaryRow & { imagesVersion: string }> {
  const [r] = await sql`SELECT ${SUMMARY_SELECT(sql)}, s.images_version::text AS images_version FROM sessions s
    WHERE s.tenant_id = ${tenantId} AND s.session_id = ${sessionId}`;
  if (!r) throw notFound('Session not found');
  return { ...summaryFromDb(r as Record<string, unknown>), imagesVersion: r.images_version as string };
}
