/** The signed-in session of the page (from GET /console/session): who, and the CSRF token. Nothing is stored. */
import { useEffect, useState } from 'preact/hooks';
import { type ErrorBody, onSessionEnded, type Problem, problemOf, sessionRequest, setCsrfToken } from './api';

export interface AdminInfo {
  userId: string;
  email: string;
  role: 'admin' | 'super_admin' | string;
  displayName: string;
}
export type Session =
  | { kind: 'tenant'; tenantId: string; expiresAt: string; csrfToken: string }
  | { kind: 'admin'; admin: AdminInfo; expiresAt: string; csrfToken: string };

/** undefined: not known yet; null: signed out. */
let current: Session | null | undefined;
const listeners = new Set<() => void>();

function set(s: Session | null) {
  current = s;
  setCsrfToken(s?.csrfToken ?? '');
  for (const l of listeners) l();
}

/** The session, re-rendering the component when it changes. */
export function useSession(): Session | null | undefined {
  const [, tick] = useState(0);
  const rendered = current;
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    listeners.add(l);
    // Effects run after the paint: a change that landed in between (the first GET /console/session answering
    // quickly) would otherwise never be seen.
    if (current !== rendered) l();
    return () => void listeners.delete(l);
  }, []);
  return current;
}

export const isSuperAdmin = (s: Session | null | undefined) => s?.kind === 'admin' && s.admin.role === 'super_admin';

export async function loadSession(): Promise<void> {
  try {
    const r = await sessionRequest('GET');
    set(r.ok ? ((await r.json()) as { data: Session }).data : null);
  } catch {
    set(null);
  }
}

/**
 * After a live stream was refused (EventSource does not say why): ends the session here only when the server says
 * it is over (401), never on a network failure, which EventSource rides out by itself.
 */
export async function recheckSession(): Promise<void> {
  const r = await sessionRequest('GET').catch(() => undefined);
  if (r?.status === 401 && current) set(null);
}

/** Signs in; a problem (wrong key, wrong password, locked account...) when refused. */
export async function signIn(body: { apiKey: string } | { email: string; password: string }): Promise<Problem | undefined> {
  const r = await sessionRequest('POST', body);
  const json = (await r.json().catch(() => undefined)) as ({ data: Session } & ErrorBody) | undefined;
  if (!r.ok) return problemOf(r.status, json, r.headers);
  set((json as { data: Session }).data);
  return undefined;
}

export async function signOut(): Promise<void> {
  await sessionRequest('DELETE').catch(() => undefined);
  set(null);
}

// Any 401 of the API: the session is over (expired, key revoked, tenant deactivated, signed out elsewhere).
onSessionEnded(() => {
  if (current) set(null);
});
