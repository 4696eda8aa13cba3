import {
  type AppError,
  badRequest,
  type GuardedImage,
  guardImage,
  INPUT_IMAGE_LIMITS,
  type Logger,
  SafeFetchError,
  safeFetch,
} from '@imagegen/platform';
import { LIMITS } from './common.js';

export interface FetchedImage {
  url: string;
  data: Buffer;
  contentType: string;
  /** What the image guard read from the header (format, dimensions): checked, nothing decoded yet. */
  image: GuardedImage;
}

/**
 * Time budget of one server-side image fetch (DNS, connect, redirects, headers AND body): well below the
 * 30 s deadline of the gRPC call that waits for it (GRPC_DEADLINE_MS), so a slow or stalled body ends in
 * this service's 400 'Failed to fetch image from URL: timeout', never in the gateway's 504.
 */
export const FETCH_BUDGET_MS = 15_000;
/** All the fetches of one request together (a scene's reference_image_urls): also below the call deadline. */
export const REQUEST_FETCH_BUDGET_MS = 20_000;

/** True for an absolute http(s) URL with a host. */
export function isHttpUrl(raw: unknown): boolean {
  if (typeof raw !== 'string' || raw.trim() === '') return false;
  try {
    const u = new URL(raw.trim());
    return (u.protocol === 'http:' || u.protocol === 'https:') && Boolean(u.hostname);
  } catch {
    return false;
  }
}

/**
 * Fetches an image server-side through the SSRF guard (public addresses only, pinned connection,
 * redirects re-checked), at most `maxBytes` (20 MiB) within FETCH_BUDGET_MS (and the caller's `signal`),
 * then passes it through the image guard (format, frames, 4,194,304 pixels, from the header only). Errors use
 * the texts of SPEC 7: 'Failed to fetch image from URL: <status>' and 'URL does not point to an image.
 * Content-Type: <type>', and the upload route's texts for what the guard refuses.
 */
export async function fetchImage(
  url: string,
  opts: {
    maxBytes?: number;
    timeoutMs?: number;
    /** A deadline shared by several fetches of one request. */
    signal?: AbortSignal;
    allowLoopback: boolean;
    invalidUrl: () => AppError;
    logger?: Logger;
  },
): Promise<FetchedImage> {
  if (!isHttpUrl(url)) throw opts.invalidUrl();
  let res: Awaited<ReturnType<typeof safeFetch>>;
  try {
    res = await safeFetch(url.trim(), {
      maxBytes: opts.maxBytes ?? LIMITS.fetchBytes,
      timeoutMs: opts.timeoutMs ?? FETCH_BUDGET_MS,
      signal: opts.signal,
      allowLoopback: opts.allowLoopback,
      headers: { accept: 'image/*', 'user-agent': 'imagegen-fetcher/1.0' },
    });
  } catch (err) {
    if (err instanceof SafeFetchError) {
      opts.logger?.debug({ err, url }, 'image fetch refused or failed');
      switch (err.reason) {
        case 'invalid_url':
          throw opts.invalidUrl();
        case 'too_large':
          throw badRequest(`Failed to fetch image from URL: image exceeds ${LIMITS.fetchBytes} bytes`);
        case 'timeout':
          throw badRequest('Failed to fetch image from URL: timeout');
        case 'blocked_address':
          throw badRequest('Failed to fetch image from URL: address not allowed');
        case 'dns_failure':
          throw badRequest('Failed to fetch image from URL: host not found');
        case 'too_many_redirects':
          throw badRequest('Failed to fetch image from URL: too many redirects');
        default:
          throw badRequest('Failed to fetch image from URL: network error');
      }
    }
    throw err;
  }
  if (res.status < 200 || res.status >= 300) throw badRequest(`Failed to fetch image from URL: ${res.status}`);
  if (!res.contentType.startsWith('image/')) {
    throw badRequest(`URL does not point to an image. Content-Type: ${res.headers['content-type'] || 'none'}`);
  }
  if (res.body.length === 0) throw badRequest('Failed to fetch image from URL: empty response');
  const image = await guardImage(res.body, { limits: INPUT_IMAGE_LIMITS, contentType: res.headers['content-type'] || 'none' });
  return { url: res.finalUrl, data: res.body, contentType: res.contentType, image };
}
