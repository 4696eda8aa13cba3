/** Admin sign-in: login (with lockout after failed attempts), logout, session authentication (the gateway's). */
import type { AdminSession } from '@imagegen/contracts/tenancy/v1/tenancy';
import { AppError, unauthorized } from '@imagegen/platform';
import { verifyPassword } from '../crypto.js';
import { isLocked } from '../domain.js';
import { LOCKOUT_MS, MAX_FAILED_LOGINS } from '../policy.js';
import * as adminSessions from '../repositories/admin-sessions.js';
import * as adminUsers from '../repositories/admin-users.js';
import { createSession, type HandlerContext, normalizeEmail, type TenancyHandlers } from './context.js';
import * as present from './present.js';

const INVALID_LOGIN = 'Invalid email or password';

const lockedError = () =>
  new AppError(423, {
    error: `Account locked after ${MAX_FAILED_LOGINS} failed sign-in attempts; ask a super_admin to unlock it or try again later`,
  });

export function adminAuthHandlers(c: HandlerContext): Pick<TenancyHandlers, 'adminLogin' | 'adminLogout' | 'authenticateAdminSession'> {
  const { sql } = c;
  return {
    async adminLogin(req) {
      const email = normalizeEmail(req.email);
      const password = typeof req.password === 'string' ? req.password : '';
      const user = email ? await adminUsers.findUserByEmail(sql, email) : undefined;
      if (!user) {
        // Same work as a real check: one scrypt verification and one small write.
        await verifyPassword(password, c.dummyPasswordHash);
        await adminUsers.writeNothing(sql);
        throw unauthorized(INVALID_LOGIN);
      }
      const ok = await verifyPassword(password, user.passwordHash);
      const locked = isLocked(user);
      if (!ok) {
        await adminUsers.recordFailedLogin(sql, user.userId, { maxAttempts: MAX_FAILED_LOGINS, lockoutMs: LOCKOUT_MS });
        throw unauthorized(INVALID_LOGIN);
      }
      // Only someone who knows the password learns that the account exists but is locked.
      if (locked) throw lockedError();
      if (!user.isActive) throw unauthorized(INVALID_LOGIN);
      return sql.begin(async (tx) => {
        // Checked again in the UPDATE: failed attempts (or a deactivation) that landed during the slow
        // password check must not be wiped out by this success.
        const signedIn = await adminUsers.recordSuccessfulLogin(tx, user.userId);
        if (!signedIn) {
          const now = await adminUsers.loginState(tx, user.userId);
          throw now?.isActive && now.locked ? lockedError() : unauthorized(INVALID_LOGIN);
        }
        const s = await createSession(tx, user.userId, req.ip || undefined, req.userAgent || undefined);
        return { ...s, user: present.adminUser(signedIn) } satisfies AdminSession;
      });
    },

    async adminLogout(req) {
      return { revoked: await adminSessions.revokeSession(sql, req.tokenHash) };
    },

    async authenticateAdminSession(req) {
      const s = await adminSessions.findSessionUser(sql, req.tokenHash);
      if (!s) throw unauthorized('Invalid or expired admin session');
      return {
        userId: s.userId,
        email: s.email,
        role: s.role,
        displayName: s.displayName,
        sessionExpiresAt: s.expiresAt.toISOString(),
      };
    },
  };
}
