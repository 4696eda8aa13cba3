/** The `invitations` table. */
import type { AdminRole, Invitation } from '../domain.js';
import type { Db } from './db.js';

interface InvitationRow {
  token: string;
  email: string;
  role: AdminRole;
  tenant_id: string | null;
  invited_by: string | null;
  expires_at: Date;
  created_at: Date;
  accepted_at: Date | null;
  accepted_user_id: string | null;
  revoked_at: Date | null;
}

function toInvitation(r: InvitationRow): Invitation {
  return {
    token: r.token,
    email: r.email,
    role: r.role,
    tenantId: r.tenant_id,
    invitedBy: r.invited_by,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
    acceptedAt: r.accepted_at,
    acceptedUserId: r.accepted_user_id,
    revokedAt: r.revoked_at,
  };
}

/** An invitation valid for `days` days from now (the database's clock). */
export async function insertInvitation(
  db: Db,
  i: { token: string; email: string; role: AdminRole; tenantId: string | null; invitedBy: string; days: number },
): Promise<Invitation> {
  const [row] = await db<InvitationRow[]>`
    INSERT INTO invitations (token, email, role, tenant_id, invited_by, expires_at)
    VALUES (${i.token}, ${i.email}, ${i.role}, ${i.tenantId}, ${i.invitedBy},
      now() + ${`${i.days} days`}::interval)
    RETURNING *`;
  return toInvitation(row);
}

/** Newest first. */
export async function listInvitations(db: Db): Promise<Invitation[]> {
  const rows = await db<InvitationRow[]>`SELECT * FROM invitations ORDER BY created_at DESC, token`;
  return rows.map(toInvitation);
}

/** forUpdate locks the row until the transaction ends (FOR UPDATE). */
export async function findInvitation(db: Db, token: string, forUpdate = false): Promise<Invitation | undefined> {
  const [row] = forUpdate
    ? await db<InvitationRow[]>`SELECT * FROM invitations WHERE token = ${token} FOR UPDATE`
    : await db<InvitationRow[]>`SELECT * FROM invitations WHERE token = ${token}`;
  return row && toInvitation(row);
}

export async function revokeInvitation(db: Db, token: string): Promise<Invitation> {
  const [row] = await db<InvitationRow[]>`UPDATE invitations SET revoked_at = now() WHERE token = ${token} RETURNING *`;
  return toInvitation(row);
}

export async function markAccepted(db: Db, token: string, userId: string) {
  await db`UPDATE invitations SET accepted_at = now(), accepted_user_id = ${userId} WHERE token = ${token}`;
}
