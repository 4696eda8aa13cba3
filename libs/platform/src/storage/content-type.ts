import { extname } from 'node:path';

const BY_EXTENSION: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.avif': 'image/avif',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.txt': 'text/plain',
};

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** Fallback when an object has no recorded content type. */
export function contentTypeFromKey(key: string): string {
  return BY_EXTENSION[extname(key).toLowerCase()] ?? DEFAULT_CONTENT_TYPE;
}
