/** Invitations of admin users: creation, reads, revocation, acceptance (which creates the user and signs in). */
import { INVITATION_DAYS_DEFAULT, INVITATION_DAYS_MAX } from '@imagegen/api-schemas/vocab';
import { conflict, invalidPayload } from '@imagegen/platform';
import { hashPassword, randomId, randomToken } from '../crypto.js';
import { type AdminRole, type Invitation, invitationStatus } from '../domain.js';
import * as adminUsers from '../repositories/admin-users.js';
import * as invitations from '../repositories/invitations.js';
import * as tenants from '../repositories/tenants.js';
import {
  createSession,
  emailTaken,
  gone,
  type HandlerContext,
  invitationNotFound,
  normalizeEmail,
  normalizeTenantId,
  type TenancyHandlers,
  tenantNotFound,
} from './context.js';
import * as present from './present.js';
import { checkDisplayName, checkPassword, checkRole, isEmail } from './validation.js';

/** An invitation's role when none is told. */
const DEFAULT_ROLE: AdminRole = 'admin';

/** The invitation, if it can still be accepted; otherwise 404 or 410. */
function acceptable(inv: Invitation | undefined): Invitation {
  if (!inv) throw invitationNotFound();
  const status = invitationStatus(inv);
  if (status === 'revoked') throw gone('Invitation has been revoked');
  if (status === 'accepted') throw gone('Invitation has already been used');
  if (status === 'expired') throw gone('Invitation has expired');
  return inv;
}

export function invitationHandlers(
  c: HandlerContext,
): Pick<TenancyHandlers, 'createInvitation' | 'listInvitations' | 'getInvitation' | 'revokeInvitation' | 'acceptInvitation'> {
  const { sql } = c;
  return {
    async createInvitation(req, ctx) {
      const details: string[] = [];
      const email = normalizeEmail(req.email);
      if (!email) details.push('email is required');
      else if (!isEmail(email)) details.push('email must be a valid email address');
      const role = checkRole(details, req.role || DEFAULT_ROLE);
      const days = req.expiresInDays || INVITATION_DAYS_DEFAULT;
      if (days < 1 || days > INVITATION_DAYS_MAX) details.push(`expires_in_days must be between 1 and ${INVITATION_DAYS_MAX}`);
      if (details.length || !role) throw invalidPayload(details);
      const tenantId = req.tenantId ? normalizeTenantId(req.tenantId) : undefined;
      if (tenantId && !(await tenants.findTenant(sql, tenantId))) throw tenantNotFound();
      if (await adminUsers.findUserByEmail(sql, email)) throw emailTaken();
      const inv = await invitations.insertInvitation(sql, {
        token: randomToken('inv_'),
        email,
        role,
        tenantId: tenantId ?? null,
        invitedBy: ctx.principal.adminUserId ?? 'admin_token',
        days,
      });
      return present.invitation(inv);
    },

    async listInvitations(req) {
      const all = (await invitations.listInvitations(sql)).map(present.invitation);
      return { invitations: req.status ? all.filter((i) => i.status === req.status) : all };
    },

    async getInvitation(req) {
      const inv = await invitations.findInvitation(sql, req.token);
      if (!inv) throw invitationNotFound();
      return present.invitation(inv);
    },

    async revokeInvitation(req) {
      return sql.begin(async (tx) => {
        const cur = await invitations.findInvitation(tx, req.token, true);
        if (!cur) throw invitationNotFound();
        if (cur.acceptedAt) throw conflict('Invitation has already been accepted and cannot be revoked');
        if (cur.revokedAt) return present.invitation(cur);
        return present.invitation(await invitations.revokeInvitation(tx, req.token));
      });
    },

    async acceptInvitation(req) {
      acceptable(await invitations.findInvitation(sql, req.token));
      const details: string[] = [];
      checkDisplayName(details, req.displayName);
      checkPassword(details, req.password);
      if (details.length) throw invalidPayload(details);
      const passwordHash = await hashPassword(req.password);
      try {
        return await sql.begin(async (tx) => {
          const inv = acceptable(await invitations.findInvitation(tx, req.token, true));
          if (await adminUsers.findUserByEmail(tx, inv.email)) throw emailTaken();
          const userId = randomId('usr_');
          const user = await adminUsers.insertUser(tx, {
            userId,
            email: inv.email,
            displayName: req.displayName.trim(),
            role: inv.role,
            passwordHash,
            tenantId: inv.tenantId,
          });
          await invitations.markAccepted(tx, inv.token, userId);
          const s = await createSession(tx, userId);
          return { ...s, user: present.adminUser(user) };
        });
      } catch (err) {
        // Two invitations of one email accepted at the same time: both pass the look-up above, the unique
        // email index decides, and the loser gets the same 409 as a sequential second accept (not a 500).
        if ((err as { code?: string }).code === '23505') throw emailTaken();
        throw err;
      }
    },
  };
}
