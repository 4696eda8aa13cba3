import type { AdminLoginBody, Infer } from '@imagegen/api-schemas';
import { adminUserJson } from '@imagegen/operations';
import { badRequest } from '@imagegen/platform';
import type { RouteModule } from '../types.js';

/**
 * Admin sign-in (issue 7): POST /admin/auth/login (email, password) -> opaque session token
 * (sent as Authorization: Bearer), POST /admin/auth/logout, GET /admin/me.
 */
const adminAuth: RouteModule = (app, { clients }) => {
  const tenancy = clients.tenancy;

  app.post<{ Body: Infer<typeof AdminLoginBody> }>('/admin/auth/login', async (req) => {
    const ip = req.headers['cf-connecting-ip'];
    const s = await tenancy.adminLogin(
      {
        email: req.body.email,
        password: req.body.password,
        ip: (Array.isArray(ip) ? ip[0] : ip) ?? req.ip,
        userAgent: String(req.headers['user-agent'] ?? '').slice(0, 500),
      },
      { requestId: req.id, source: 'admin' },
    );
    return { data: { token: s.token, tokenType: 'Bearer', expiresAt: s.expiresAt, user: adminUserJson(s.user) } };
  });

  app.post('/admin/auth/logout', async (req) => {
    if (!req.adminUser) throw badRequest('Only session tokens can be logged out; the legacy admin token is configuration');
    await tenancy.adminLogout({ tokenHash: req.adminUser.tokenHash }, req.principal);
    return { data: { success: true } };
  });

  app.get('/admin/me', async (req) => {
    if (!req.adminUser) {
      return { data: { user: null, role: 'super_admin', authMethod: 'admin_token', sessionExpiresAt: null } };
    }
    const user = await tenancy.getAdminUser({ userId: req.adminUser.userId }, req.principal);
    return {
      data: {
        user: adminUserJson(user),
        role: user.role,
        authMethod: 'session',
        sessionExpiresAt: req.adminUser.sessionExpiresAt,
      },
    };
  });
};

export default adminAuth;
