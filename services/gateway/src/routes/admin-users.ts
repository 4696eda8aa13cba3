import type { AdminUserUpdateBody, Infer } from '@imagegen/api-schemas';

import { adminUserJson } from '@imagegen/operations';
import type { RouteModule } from '../types.js';

/** GET /admin/users, GET/PATCH /admin/users/:userId, POST /admin/users/:userId/unlock. */
const adminUsers: RouteModule = (app, { clients }) => {
  const tenancy = clients.tenancy;

  app.get('/admin/users', async (req) => {
    const r = await tenancy.listAdminUsers({}, req.principal);
    return { data: r.users.map(adminUserJson) };
  });

  app.get<{ Params: { userId: string } }>('/admin/users/:userId', async (req) => ({
    data: adminUserJson(await tenancy.getAdminUser({ userId: req.params.userId }, req.principal)),
  }));

  app.patch<{ Params: { userId: string }; Body: Infer<typeof AdminUserUpdateBody> }>('/admin/users/:userId', async (req) => {
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
  });

  app.post<{ Params: { userId: string } }>('/admin/users/:userId/unlock', async (req) => {
    const u = await tenancy.unlockAdminUser({ userId: req.params.userId }, req.principal);
    return { data: { success: true, userId: u.userId, message: 'Account unlocked; failed login attempts reset to 0' } };
  });
};

export default adminUsers;
