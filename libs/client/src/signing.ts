import type { Middleware } from 'openapi-fetch';

/**
 * Signed requests (README, "Signed requests"; an extension of SPEC 5.8): for an API key that requires them, every
 * request carries `X-Timestamp` (milliseconds since the epoch) and `X-Signature`, the hex HMAC-SHA256 keyed with
 * the key's signing secret (the whole string, as UTF-8) of
 *
 *   `${timestamp}\n${METHOD}\n${pathWithQuery}\n` followed by the raw body bytes (nothing when there is no body)
 *
 * where pathWithQuery is the path and query exactly as sent (e.g. `/api/images?limit=5`). The gateway refuses a
 * timestamp more than 5 minutes away and a signature it has seen before, so each request is signed anew.
 * Web Crypto only: runs in Node 20+, browsers, Deno, Bun and workers.
 */

export interface SignedParts {
  /** X-Timestamp: milliseconds since the epoch, as sent. */
  timestamp: string;
  method: string;
  /** The path and query as sent on the request line, e.g. `/api/images?limit=5`. */
  pathWithQuery: string;
  /** The raw body (a string is taken as UTF-8). */
  body?: Uint8Array | string;
}

const encoder = new TextEncoder();

/** The bytes that are signed. */
export function signedBytes(parts: SignedParts): Uint8Array<ArrayBuffer> {
  const head = encoder.encode(`${parts.timestamp}\n${parts.method.toUpperCase()}\n${parts.pathWithQuery}\n`);
  const body = typeof parts.body === 'string' ? encoder.encode(parts.body) : (parts.body ?? new Uint8Array());
  const out = new Uint8Array(head.length + body.length);
  out.set(head, 0);
  out.set(body, head.length);
  return out;
}

const hmacKey = (secret: string) =>
  crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);

const hex = (buf: ArrayBuffer) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');

/** X-Signature of a request: lowercase hex of HMAC-SHA256(secret, signedBytes(parts)). */
export async function signRequest(secret: string, parts: SignedParts): Promise<string> {
  return hex(await crypto.subtle.sign('HMAC', await hmacKey(secret), signedBytes(parts)));
}

/**
 * openapi-fetch middleware that signs every request with `secret` (run it last: it signs the request as it will
 * be sent). `now` gives the timestamp (tests).
 */
export function signingMiddleware(secret: string, now: () => number = Date.now): Middleware {
  let key: Promise<CryptoKey> | undefined;
  return {
    async onRequest({ request }) {
      key ??= hmacKey(secret);
      const body = request.body ? new Uint8Array(await request.clone().arrayBuffer()) : undefined;
      const url = new URL(request.url);
      const timestamp = String(now());
      const signature = await crypto.subtle.sign(
        'HMAC',
        await key,
        signedBytes({ timestamp, method: request.method, pathWithQuery: url.pathname + url.search, body }),
      );
      request.headers.set('x-timestamp', timestamp);
      request.headers.set('x-signature', hex(signature));
      return request;
    },
  };
}
