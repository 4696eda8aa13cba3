import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { CURSOR_MAX, SESSION_ID_MAX } from '@imagegen/api-schemas/vocab';
import { invalidPayload } from '@imagegen/platform';

/**
 * Keyset cursors of the image lists (issue 16): `pagination.nextCursor` names the last row of a page by its
 * sort key, and `cursor` continues right after it (`(created_at, id) < (...)` for newest first), in the time of
 * one page however deep it is. A cursor is opaque and tamper-proof: base64url of the position, then an
 * HMAC-SHA256 over it and the tenant id, so a changed byte or another tenant's cursor is refused (400 'Invalid
 * request payload', details ['cursor is invalid']). The sort order travels inside: a cursor of another order is
 * refused the same way. Filters do not: a cursor used with other filters continues from the same position.
 */
export interface CursorPosition<Id extends number | string = number> {
  /** The sort of the list that made it (newest, oldest, largest, smallest; SESSION_SORT for the sessions list). */
  sort: string;
  /** The sort value of the last row: created_at (last_activity_at) in UTC with microseconds, or size_bytes as digits. */
  value: string;
  /** The tie-breaker: an image id, or a session id (text) in the sessions list. */
  id: Id;
}

/** The sort name inside sessions list cursors (last_activity_at DESC, session_id): no image cursor passes for one. */
export const SESSION_SORT = 'sessions';
/**
 * Longest cursor accepted: an image cursor fits in 200 characters; a session cursor carries a session id of up to
 * SESSION_ID_MAX characters (up to 3 bytes each in UTF-8, 6 when JSON escapes them), base64url-encoded: those, and
 * the asset lists' text cursors, may be as long as the REST `cursor` field allows (CURSOR_MAX).
 */
const MAX_LENGTH = 200;

const MAC_BYTES = 16;
const VALUE = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z|\d{1,18})$/;

// One random key per process (not per caller): the image list and the search presets check each other's cursors.
let processKey: Buffer | undefined;

/** The signing key: CURSOR_KEY, else derived from CREDENTIALS_KEY, else random per process (with a warning by the caller). */
export function cursorKey(config: { cursorKey?: string; credentialsKey?: string }): { key: Buffer; ephemeral: boolean } {
  if (config.cursorKey) return { key: createHash('sha256').update(`imagegen-cursor:${config.cursorKey}`).digest(), ephemeral: false };
  if (config.credentialsKey) {
    return {
      key: createHmac('sha256', Buffer.from(config.credentialsKey, 'base64')).update('imagegen-list-cursor-v1').digest(),
      ephemeral: false,
    };
  }
  processKey ??= randomBytes(32);
  return { key: processKey, ephemeral: true };
}

const mac = (key: Buffer, tenantId: string, body: string) =>
  createHmac('sha256', key).update(tenantId).update('\n').update(body).digest().subarray(0, MAC_BYTES);

export function encodeCursor(key: Buffer, tenantId: string, p: CursorPosition<number | string>): string {
  const body = Buffer.from(JSON.stringify([1, p.sort, p.value, p.id])).toString('base64url');
  return `${body}.${mac(key, tenantId, body).toString('base64url')}`;
}

const invalid = () => invalidPayload(['cursor is invalid']);

/** The position of a cursor made for `tenantId` and `sort`; 400 'Invalid request payload' otherwise. */
export function decodeCursor(key: Buffer, tenantId: string, sort: string, cursor: string): CursorPosition {
  const { value, id } = verified(key, tenantId, sort, cursor, MAX_LENGTH);
  if (!Number.isSafeInteger(id) || (id as number) < 1) throw invalid();
  return { sort, value, id: id as number };
}

/** As decodeCursor, for a list whose tie-breaker is a text id (the sessions list). */
export function decodeTextCursor(key: Buffer, tenantId: string, sort: string, cursor: string): CursorPosition<string> {
  const { value, id } = verified(key, tenantId, sort, cursor, CURSOR_MAX);
  if (typeof id !== 'string' || id.length < 1 || id.length > SESSION_ID_MAX) throw invalid();
  return { sort, value, id };
}

/** The JSON body of a cursor signed for `tenantId` (its MAC checked); 400 otherwise. */
function signedBody(key: Buffer, tenantId: string, cursor: string, maxLength: number): unknown {
  if (cursor.length > maxLength) throw invalid();
  const [body, sig, extra] = cursor.split('.');
  if (!body || !sig || extra !== undefined) throw invalid();
  const given = Buffer.from(sig, 'base64url');
  if (given.length !== MAC_BYTES || !timingSafeEqual(given, mac(key, tenantId, body))) throw invalid();
  try {
    return JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
}

/** The value and (unchecked) id of a signed cursor of `tenantId` and `sort`. */
function verified(key: Buffer, tenantId: string, sort: string, cursor: string, maxLength: number): { value: string; id: unknown } {
  const parsed = signedBody(key, tenantId, cursor, maxLength);
  if (!Array.isArray(parsed) || parsed.length !== 4 || parsed[0] !== 1) throw invalid();
  const [, s, value, id] = parsed as [number, unknown, unknown, unknown];
  if (s !== sort || typeof value !== 'string' || !VALUE.test(value)) throw invalid();
  return { value, id };
}

/**
 * Cursors of the asset lists (characters, scenes, style presets, products): a sort key of several columns, each
 * value as text, then an id. Version 2 of the body, so no image or session cursor passes for one; `sort` names
 * the list and its order ('characters:name'), so a cursor of another list or order is refused.
 */
export function encodeKeysetCursor(key: Buffer, tenantId: string, sort: string, values: string[], id: number): string {
  const body = Buffer.from(JSON.stringify([2, sort, values, id])).toString('base64url');
  return `${body}.${mac(key, tenantId, body).toString('base64url')}`;
}

/** The values and id of an asset list cursor made for `tenantId` and `sort` with `arity` values; 400 otherwise. */
export function decodeKeysetCursor(
  key: Buffer,
  tenantId: string,
  sort: string,
  arity: number,
  cursor: string,
): { values: string[]; id: number } {
  const parsed = signedBody(key, tenantId, cursor, CURSOR_MAX);
  if (!Array.isArray(parsed) || parsed.length !== 4 || parsed[0] !== 2 || parsed[1] !== sort) throw invalid();
  const [, , values, id] = parsed as [number, string, unknown, unknown];
  if (!Array.isArray(values) || values.length !== arity || !values.every((v) => typeof v === 'string')) throw invalid();
  if (!Number.isSafeInteger(id) || (id as number) < 1) throw invalid();
  return { values: values as string[], id: id as number };
}
