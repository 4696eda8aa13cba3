import { type AppError, badRequest, notFound } from '../errors.js';

export const MAX_KEY_LENGTH = 1024;

/**
 * Keys are relative slash-separated paths. Besides the obvious traversal cases, segments starting
 * with '.' are refused: the filesystem backend keeps its sidecars and temp files under such names.
 */
export function validateKey(key: string): string {
  const bad = (why: string): AppError => badRequest('Invalid object key', why);
  if (typeof key !== 'string' || key.length === 0) throw bad('empty key');
  if (key.length > MAX_KEY_LENGTH) throw bad(`longer than ${MAX_KEY_LENGTH} characters`);
  if (key.includes('\\')) throw bad('backslash');
  if (key.startsWith('/')) throw bad('absolute path');
  if (key.includes('..')) throw bad("'..'");
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(key)) throw bad('control character');
  for (const segment of key.split('/')) {
    if (segment === '') throw bad('empty path segment');
    if (segment.startsWith('.')) throw bad("segment starting with '.'");
  }
  return key;
}

/** `tenants/<tenantId>/<parts...>`: every stored object of a tenant lives under its own prefix. */
export function tenantKey(tenantId: string, ...parts: string[]): string {
  if (!tenantId || tenantId.includes('/')) throw badRequest('Invalid object key', 'bad tenant id');
  if (parts.length === 0) throw badRequest('Invalid object key', 'no key parts');
  return validateKey(`tenants/${tenantId}/${parts.join('/')}`);
}

/**
 * Keys that validateKey accepts and encodeKeyPath leaves unchanged: segments of unreserved URL characters,
 * none empty or starting with '.', and no '..' anywhere (checked apart: isPlainKey). Every key the services
 * make is one. PLAIN_KEY_SQL is the same test as a PostgreSQL regular expression.
 */
export const PLAIN_KEY = /^[A-Za-z0-9_~-][A-Za-z0-9._~-]*(?:\/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*$/;
export const PLAIN_KEY_SQL = '^[A-Za-z0-9_~-][A-Za-z0-9._~-]*(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*$';

export function isPlainKey(key: string): boolean {
  return typeof key === 'string' && key.length <= MAX_KEY_LENGTH && PLAIN_KEY.test(key) && !key.includes('..');
}

/** The key as a URL path: each segment URI-encoded, slashes kept. */
export function encodeKeyPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

export const objectNotFound = (): AppError => notFound('Object not found');

export function trimTrailingSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
