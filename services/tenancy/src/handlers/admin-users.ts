/** Admin users: reads, updates (the last active super_admin stays), unlocking. */
import { conflict, invalidPayload } from '@imagegen/platform';
import { SUPER_ADMIN } from '../domain.js';
import * as adminSessions from '../repositories/admin-sessions.js';
import * as adminUsers from '../repositories/admin-users.js';
import { type HandlerContext, type TenancyHandlers, userNotFound } from './context.js';
import * as present from './present.js';
import { checkDisplayName, checkRole } from './validation.js';

export function adminUserHandlers(
  c: HandlerContext,
): Pick<TenancyHandlers, 'getAdminUser' | 'listAdminUsers' | 'updateAdminUser' | 'unlockAdminUser'> {
  const { sql } = c;
  return {
    async getAdminUser(req) {
      const u = await adminUsers.findUser(sql, req.userId);
      if (!u) throw userNotFound();
      return present.adminUser(u);
    },

    async listAdminUsers() {
      return { users: (await adminUsers.listUsers(sql)).map(present.adminUser) };
    },

    async updateAdminUser(req) {
      const details: string[] = [];
      if (req.displayName !== undefined) checkDisplayName(details, req.displayName);
      const newRole = req.role === undefined ? undefined : checkRole(details, req.role);
      if (details.length) throw invalidPayload(details);
      return sql.begin(async (tx) => {
        // One writer at a time decides the "last active super_admin" rule.
        await adminUsers.lockUserWrites(tx);
        const cur = await adminUsers.findUser(tx, req.userId, true);
        if (!cur) throw userNotFound();
        const role = newRole ?? cur.role;
        const isActive = req.isActive ?? cur.isActive;
        const losesSuper = cur.role === SUPER_ADMIN && cur.isActive && (role !== SUPER_ADMIN || !isActive);
        if (losesSuper && (await adminUsers.countOtherActiveSuperAdmins(tx, cur.userId)) === 0) {
          throw conflict('Cannot demote or deactivate the last active super_admin');
        }
        const user = await adminUsers.updateUser(tx, cur.userId, {
          displayName: req.displayName?.trim() ?? cur.displayName,
          role,
          isActive,
        });
        if (!isActive) await adminSessions.revokeUserSessions(tx, cur.userId);
        return present.adminUser(user);
      });
    },

    async unlockAdminUser(req) {
      const u = await adminUsers.unlockUser(sql, req.userId);
      if (!u) throw userNotFound();
      return present.adminUser(u);
    },
  };
}
