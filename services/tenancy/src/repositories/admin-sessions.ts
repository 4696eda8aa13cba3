/** The `admin_sessions` table (opaque bearer tokens; only their sha256 is stored). */
import type { AdminRole, SessionUser } from '../domain.js';
import type { Db } from './db.js';

interface SessionUserRow {
  user_id: string;
  email: string;
  role: AdminRole;
  display_name: string;
  expires_at: Date;
}

export async function insertSession(
  db: Db,
  s: { sessionId: string; tokenHash: string; userId: string; expiresAt: Date; ip?: string; userAgent?: string },
) {
  await db`
    INSERT INTO admin_sessions (session_id, token_hash, user_id, expires_at, ip, user_agent, last_seen_at)
    VALUES (${s.sessionId}, ${s.tokenHash}, ${s.userId}, ${s.expiresAt}, ${s.ip ?? null}, ${s.userAgent ?? null}, now())`;
}

/** The active user of a live (unrevoked, unexpired) session. */
export async function findSessionUser(db: Db, tokenHash: string): Promise<SessionUser | undefined> {
  const [row] = await db<SessionUserRow[]>`
    SELECT u.user_id, u.email, u.role, u.display_name, s.expires_at
    FROM admin_sessions s JOIN admin_users u ON u.user_id = s.user_id
    WHERE s.token_hash = ${tokenHash} AND s.revoked_at IS NULL AND s.expires_at > now() AND u.is_active`;
  if (!row) return undefined;
  return { userId: row.user_id, email: row.email, role: row.role, displayName: row.display_name, expiresAt: row.expires_at };
}

/** Revokes one session; false when it was unknown or revoked already. */
export async function revokeSession(db: Db, tokenHash: string): Promise<boolean> {
  const r = await db`UPDATE admin_sessions SET revoked_at = now() WHERE token_hash = ${tokenHash} AND revoked_at IS NULL`;
  return r.count > 0;
}

/** Revokes every live session of a user. */
export async function revokeUserSessions(db: Db, userId: string) {
  await db`UPDATE admin_sessions SET revoked_at = now() WHERE user_id = ${userId} AND revoked_at IS NULL`;
}
