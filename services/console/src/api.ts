/**
 * The console's one way to the API: the typed client of libs/client (the public /api and /admin routes only),
 * sending the session cookie (credentials 'same-origin') and, on every state-changing request, the CSRF token the
 * session answered (kept in memory, never in storage or a URL). A 401 ends the session in the page (sign-in, then
 * back to the page that was open).
 */
import { imagegenClient } from '@imagegen/client';

export type { Answer, components, paths } from '@imagegen/client';

let csrfToken = '';
let onSignedOut: () => void = () => {};

export function setCsrfToken(token: string): void {
  csrfToken = token;
}
export function onSessionEnded(fn: () => void): void {
  onSignedOut = fn;
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

export const api = imagegenClient({
  baseUrl: location.origin,
  credentials: 'same-origin',
  middleware: [
    {
      onRequest({ request }) {
        if (!SAFE.has(request.method)) request.headers.set('X-CSRF-Token', csrfToken);
        return request;
      },
      onResponse({ response }) {
        if (response.status === 401) onSignedOut();
        return response;
      },
    },
  ],
});

/** The console's own session routes (the backend-for-frontend; not part of the public API). */
export async function sessionRequest(method: 'GET' | 'POST' | 'DELETE', body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  return fetch('/console/session', {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** An API error body: the SPEC's envelope. */
export interface ErrorBody {
  error?: string;
  details?: unknown;
  code?: string;
  retryAfter?: number;
}

/** An API failure said in words, with its details as a list (what ErrorBanner and the fields show). */
export interface Problem {
  status: number;
  title: string;
  details: string[];
  /** Field name -> message, where a detail names a field ("prompt must be ..."). */
  fields: Record<string, string>;
}

function detailLines(details: unknown): string[] {
  if (details === undefined || details === null) return [];
  if (Array.isArray(details)) return details.map((d) => (typeof d === 'string' ? d : JSON.stringify(d)));
  if (typeof details === 'string') return [details];
  if (typeof details === 'object') {
    return Object.entries(details as Record<string, unknown>).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`);
  }
  return [String(details)];
}

/** What a failed answer means to a person: 402 quota, 429 with the wait, 400 details, content blocked. */
export function problemOf(status: number, body: ErrorBody | undefined, headers?: Headers): Problem {
  const details = detailLines(body?.details);
  const fields: Record<string, string> = {};
  for (const d of details) {
    const m = /^([a-zA-Z_][\w.]*)\b (must|is|cannot|exceeds|should|has)/.exec(d);
    if (m && !fields[m[1]]) fields[m[1]] = d;
  }
  let title = body?.error ?? `Request failed (${status})`;
  // A job that ended on the quota carries the 402's text only (the execution's error).
  if (status === 402 || body?.code === 'QUOTA_EXCEEDED' || body?.error === 'Monthly storage quota exceeded') {
    title = "This month's storage quota is used up: delete images to free space, or ask an administrator for a larger quota.";
  } else if (status === 429) {
    const wait = body?.retryAfter ?? Number(headers?.get('retry-after') ?? Number.NaN);
    title = Number.isFinite(wait)
      ? `Too many requests: try again in ${wait} second${wait === 1 ? '' : 's'}.`
      : 'Too many requests: wait a moment and try again.';
  } else if (body?.code === 'CONTENT_BLOCKED' || /content blocked/i.test(body?.error ?? '')) {
    title = `The provider's safety filter blocked this content: ${body?.error ?? ''}`.trim();
  } else if (status === 403 && body?.error === 'super_admin privileges required') {
    title = 'Only a super_admin can do this.';
  } else if (status >= 500) {
    title = `The service could not answer (${status}): ${body?.error ?? 'try again'}`;
  }
  return { status, title, details, fields };
}

/** The problem of an openapi-fetch result, or undefined when it succeeded. */
export function problem(result: { error?: unknown; response: Response }): Problem | undefined {
  if (result.response.ok) return undefined;
  return problemOf(result.response.status, result.error as ErrorBody | undefined, result.response.headers);
}

/** A network failure (no answer at all) as a problem. */
export function networkProblem(err: unknown): Problem {
  return { status: 0, title: `No answer from the server: ${err instanceof Error ? err.message : String(err)}`, details: [], fields: {} };
}
