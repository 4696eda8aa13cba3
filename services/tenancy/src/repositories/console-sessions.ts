/** The `console_sessions` table (the web console's opaque session tokens; only their sha256 is stored). */
import type { Db } from './db.js';

export async function insertConsoleSession(
  db: Db,
  s: { sessionId: string; tokenHash: string; tenantId: string; keyId: string; expiresAt: Date; ip?: string; userAgent?: string },
) {
  await db`
    INSERT INTO console_sessions (session_id, token_hash, tenant_id, key_id, expires_at, ip, user_agent)
    VALUES (${s.sessionId}, ${s.tokenHash}, ${s.tenantId}, ${s.keyId}, ${s.expiresAt}, ${s.ip ?? null}, ${s.userAgent ?? null})`;
}

/** The key of a live session: not ended, unexpired, its key active and its tenant active (by the unique token_hash). */
export async function findLiveConsoleSession(
  db: Db,
  tokenHash: string,
): Promise<{ keyHash: string; tenantId: string; expiresAt: Date } | undefined> {
  const [row] = await db<{ key_hash: string; tenant_id: string; expires_at: Date }[]>`
    SELECT k.key_hash, s.tenant_id, s.expires_at
    FROM console_sessions s
    JOIN api_keys k ON k.key_id = s.key_id
    JOIN tenants t ON t.tenant_id = s.tenant_id
    WHERE s.token_hash = ${tokenHash} AND s.ended_at IS NULL AND s.expires_at > now() AND k.is_active AND t.is_active`;
  return row ? { keyHash: row.key_hash, tenantId: row.tenant_id, expiresAt: row.expires_at } : undefined;
}

/** Ends one session; false when it was unknown or ended already. */
export async function endConsoleSession(db: Db, tokenHash: string): Promise<boolean> {
  const r = await db`UPDATE console_sessions SET ended_at = now() WHERE token_hash = ${tokenHash} AND ended_at IS NULL`;
  return r.count > 0;
}
