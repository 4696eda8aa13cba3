import { AdminUserUpdateBody, type Infer, UserParams } from '@imagegen/api-schemas';

import { adminUserJson } from '@imagegen/operations';
import type { RouteModule } from '../types.js';
import { wireSchema } from '../validation.js';

/** GET /admin/users, GET/PATCH /admin/users/:userId, POST /admin/users/:userId/unlock. */
const adminUsers: RouteModule = (app, { clients }) => {
  const tenancy = clients.tenancy;

  app.get('/admin/users', { schema: { summary: 'List admin users' } }, async (req) => {
    const r = await tenancy.listAdminUsers({}, req.principal);
    return { data: r.users.map(adminUserJson) };
  });

  app.get<{ Params: { userId: string } }>(
    '/admin/users/:userId',
    {
      schema: { summary: 'Get an admin user', params: wireSchema(UserParams) },
    },
    async (req) => ({ data: adminUserJson(await tenancy.getAdminUser({ userId: req.params.userId }, req.principal)) }),
  );

  app.patch<{ Params: { userId: string }; Body: Infer<typeof AdminUserUpdateBody> }>(
    '/admin/users/:userId',
    {
      schema: {
        summary: 'Change display name, role or active state (deactivation ends the user sessions at once)',
        params: wireSchema(UserParams),
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
      schema: {
        summary: 'Unlock a user locked by failed sign-ins (failed attempts reset to 0)',
        params: wireSchema(UserParams),
      },
    },
    async (req) => {
      const u = await tenancy.unlockAdminUser({ userId: req.params.userId }, req.principal);
      return { data: { success: true, userId: u.userId, message: 'Account unlocked; failed login attempts reset to 0' } };
    },
  );
};

export default adminUsers;
