import { AdminUserUpdateBody, type Infer } from '@imagegen/api-schemas';
import type { AdminUser } from '@imagegen/contracts/tenancy/v1/tenancy';
import type { RouteModule } from '../app.js';
import { adminSecurity, tenancyClient } from '../auth.js';
import { wireSchema } from '../validation.js';

/** Admin user record (SPEC 2) plus lock state and timestamps. */
export function adminUserJson(u: AdminUser | undefined) {
  if (!u) return null;
  return {
    userId: u.userId,
    email: u.email,
    displayName: u.displayName,
    role: u.role,
    isActive: u.isActive,
    lastLoginAt: u.lastLoginAt ?? null,
    isLocked: u.isLocked,
    failedLoginAttempts: u.failedLoginAttempts,
    tenantId: u.tenantId ?? null,
    createdAt: u.createdAt,
    updatedAt: u.updatedAt,
  };
}

const userParams = {
  type: 'object',
  required: ['userId'],
  properties: { userId: { type: 'string', minLength: 1, maxLength: 64 } },
};

/** GET /admin/users, GET/PATCH /admin/users/:userId, POST /admin/users/:userId/unlock. */
const adminUsers: RouteModule = (app, { ctx }) => {
  const tenancy = tenancyClient(ctx);

  app.get(
    '/admin/users',
    { config: { auth: 'admin' }, schema: { tags: ['admin'], summary: 'List admin users', security: adminSecurity } },
    async (req) => {
      const r = await tenancy.listAdminUsers({}, req.principal);
      return { data: r.users.map(adminUserJson) };
    },
  );

  app.get<{ Params: { userId: string } }>(
    '/admin/users/:userId',
    {
      config: { auth: 'admin' },
      schema: { tags: ['admin'], summary: 'Get an admin user', params: userParams, security: adminSecurity },
    },
    async (req) => ({ data: adminUserJson(await tenancy.getAdminUser({ userId: req.params.userId }, req.principal)) }),
  );

  app.patch<{ Params: { userId: string }; Body: Infer<typeof AdminUserUpdateBody> }>(
    '/admin/users/:userId',
    {
      config: { auth: 'super_admin' },
      schema: {
        tags: ['admin'],
        summary: 'Change display name, role or active state (deactivation ends the user sessions at once)',
        security: adminSecurity,
        params: userParams,
        body: wireSchema(AdminUserUpdateBody),
      },
    },
    async (req) => {
      const b = req.body ?? {};
      const u = await tenancy.updateAdminUser(
        { userId: req.params.userId, displayName: b.display_name, role: b.role, isActive: b.is_active },
        req.principal,
      );
      return {
        data: {
          user: {
            userId: u.userId,
            email: u.email,
            displayName: u.displayName,
            role: u.role,
            isActive: u.isActive,
            updatedAt: u.updatedAt,
          },
        },
      };
    },
  );

  app.post<{ Params: { userId: string } }>(
    '/admin/users/:userId/unlock',
    {
      config: { auth: 'super_admin' },
      schema: {
        tags: ['admin'],
        summary: 'Unlock a user locked by failed sign-ins (failed attempts reset to 0)',
        security: adminSecurity,
        params: userParams,
      },
    },
    async (req) => {
      const u = await tenancy.unlockAdminUser({ userId: req.params.userId }, req.principal);
      return { data: { success: true, userId: u.userId, message: 'Account unlocked; failed login attempts reset to 0' } };
    },
  );
};

export default adminUsers;
