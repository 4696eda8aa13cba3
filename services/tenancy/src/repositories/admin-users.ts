/** The `admin_users` table (emails are unique case-insensitively: the lower(email) index). */
import type { AdminRole, AdminUser } from '../domain.js';
import type { Db } from './db.js';

interface AdminUserRow {
  user_id: string;
  email: string;
  display_name: string;
  role: AdminRole;
  is_active: boolean;
  password_hash: string;
  failed_login_attempts: number;
  locked_until: Date | null;
  last_login_at: Date | null;
  tenant_id: string | null;
  created_at: Date;
  updated_at: Date;
}

function toAdminUser(r: AdminUserRow): AdminUser {
  return {
    userId: r.user_id,
    email: r.email,
    displayName: r.display_name,
    role: r.role,
    isActive: r.is_active,
    passwordHash: r.password_hash,
    failedLoginAttempts: r.failed_login_attempts,
    lockedUntil: r.locked_until,
    lastLoginAt: r.last_login_at,
    tenantId: r.tenant_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export async function findUserByEmail(db: Db, email: string): Promise<AdminUser | undefined> {
  const [row] = await db<AdminUserRow[]>`SELECT * FROM admin_users WHERE lower(email) = ${email.toLowerCase()}`;
  return row && toAdminUser(row);
}

/** forUpdate locks the row until the transaction ends (FOR UPDATE). */
export async function findUser(db: Db, userId: string, forUpdate = false): Promise<AdminUser | undefined> {
  const [row] = forUpdate
    ? await db<AdminUserRow[]>`SELECT * FROM admin_users WHERE user_id = ${userId} FOR UPDATE`
    : await db<AdminUserRow[]>`SELECT * FROM admin_users WHERE user_id = ${userId}`;
  return row && toAdminUser(row);
}

export async function listUsers(db: Db): Promise<AdminUser[]> {
  const rows = await db<AdminUserRow[]>`SELECT * FROM admin_users ORDER BY created_at, user_id`;
  return rows.map(toAdminUser);
}

/** A user made from an invitation (signed in at once, so last_login_at is now). */
export async function insertUser(
  db: Db,
  u: { userId: string; email: string; displayName: string; role: AdminRole; passwordHash: string; tenantId: string | null },
): Promise<AdminUser> {
  const [row] = await db<AdminUserRow[]>`
    INSERT INTO admin_users (user_id, email, display_name, role, password_hash, tenant_id, last_login_at)
    VALUES (${u.userId}, ${u.email}, ${u.displayName}, ${u.role}, ${u.passwordHash}, ${u.tenantId}, now())
    RETURNING *`;
  return toAdminUser(row);
}

/** The first super_admin (from configuration); false when a user of that email exists already. */
export async function insertBootstrapAdmin(db: Db, u: { userId: string; email: string; passwordHash: string }): Promise<boolean> {
  const rows = await db<{ user_id: string }[]>`
    INSERT INTO admin_users (user_id, email, display_name, role, password_hash)
    VALUES (${u.userId}, ${u.email}, 'Administrator', 'super_admin', ${u.passwordHash})
    ON CONFLICT ((lower(email))) DO NOTHING RETURNING user_id`;
  return rows.length > 0;
}

/**
 * Counts a failed sign-in; the attempt that reaches `maxAttempts` locks the account for `lockoutMs` (never
 * shortening a lock that lasts longer).
 */
export async function recordFailedLogin(db: Db, userId: string, policy: { maxAttempts: number; lockoutMs: number }) {
  await db`
    UPDATE admin_users SET failed_login_attempts = failed_login_attempts + 1,
      locked_until = CASE WHEN failed_login_attempts + 1 >= ${policy.maxAttempts}
        THEN GREATEST(COALESCE(locked_until, now()), now() + ${`${policy.lockoutMs} milliseconds`}::interval) ELSE locked_until END
    WHERE user_id = ${userId}`;
}

/** An UPDATE that changes nothing: a sign-in of an unknown email does the same small write as a failed one. */
export async function writeNothing(db: Db) {
  await db`UPDATE admin_users SET failed_login_attempts = failed_login_attempts WHERE false`;
}

/**
 * Clears the failed attempts and stamps the sign-in, only while the user is active and unlocked (checked in
 * the UPDATE itself); undefined otherwise.
 */
export async function recordSuccessfulLogin(db: Db, userId: string): Promise<AdminUser | undefined> {
  const [row] = await db<AdminUserRow[]>`
    UPDATE admin_users SET failed_login_attempts = 0, locked_until = NULL, last_login_at = now()
    WHERE user_id = ${userId} AND is_active AND (locked_until IS NULL OR locked_until <= now()) RETURNING *`;
  return row && toAdminUser(row);
}

/** Whether a user is active and locked right now (by the database's clock); undefined for an unknown user. */
export async function loginState(db: Db, userId: string): Promise<{ isActive: boolean; locked: boolean } | undefined> {
  const [row] = await db<{ is_active: boolean; locked: boolean | null }[]>`
    SELECT is_active, locked_until > now() AS locked FROM admin_users WHERE user_id = ${userId}`;
  return row && { isActive: row.is_active, locked: row.locked === true };
}

/** Serializes writers of admin users until the transaction ends (the "last active super_admin" rule). */
export async function lockUserWrites(db: Db) {
  await db`SELECT pg_advisory_xact_lock(hashtext('tenancy:admin-users'))`;
}

export async function countOtherActiveSuperAdmins(db: Db, userId: string): Promise<number> {
  const [{ n }] = await db<[{ n: number }]>`
    SELECT count(*)::int AS n FROM admin_users WHERE role = 'super_admin' AND is_active AND user_id <> ${userId}`;
  return n;
}

export async function updateUser(
  db: Db,
  userId: string,
  u: { displayName: string; role: AdminRole; isActive: boolean },
): Promise<AdminUser> {
  const [row] = await db<AdminUserRow[]>`
    UPDATE admin_users SET display_name = ${u.displayName}, role = ${u.role},
      is_active = ${u.isActive}, updated_at = now()
    WHERE user_id = ${userId} RETURNING *`;
  return toAdminUser(row);
}

/** Clears the failed attempts and the lock; undefined for an unknown user. */
export async function unlockUser(db: Db, userId: string): Promise<AdminUser | undefined> {
  const [row] = await db<AdminUserRow[]>`
    UPDATE admin_users SET failed_login_attempts = 0, locked_until = NULL, updated_at = now()
    WHERE user_id = ${userId} RETURNING *`;
  return row && toAdminUser(row);
}
