import type { Infer, InvitationAcceptBody, InvitationBody } from '@imagegen/api-schemas';

import { adminUserJson, invitationJson } from '@imagegen/operations';
import type { RouteModule } from '../types.js';

/**
 * Invitations: create (super_admin), list (admin), revoke (super_admin), and the public acceptance
 * flow: GET /admin/invitations/:token (what is being accepted) and POST /admin/invitations/:token/accept
 * {display_name, password} -> the new user and a session token.
 */
const invitations: RouteModule = (app, { clients }) => {
  const tenancy = clients.tenancy;

  app.get<{ Querystring: { status?: string } }>('/admin/invitations', async (req) => {
    const r = await tenancy.listInvitations({ status: req.query.status ?? '' }, req.principal);
    const full = req.principal.adminRole === 'super_admin';
    return { data: r.invitations.map((i) => invitationJson(i, full)) };
  });

  app.post<{ Body: Infer<typeof InvitationBody> }>('/admin/invitations', async (req) => {
    const b = req.body;
    const i = await tenancy.createInvitation(
      { email: b.email, role: b.role ?? 'admin', tenantId: b.tenant_id ?? undefined, expiresInDays: b.expires_in_days ?? 7 },
      req.principal,
    );
    return {
      data: {
        token: i.token,
        email: i.email,
        role: i.role,
        tenantId: i.tenantId ?? null,
        expiresAt: i.expiresAt,
        createdAt: i.createdAt,
        status: i.status,
      },
    };
  });

  app.delete<{ Params: { token: string } }>('/admin/invitations/:token', async (req) => {
    await tenancy.revokeInvitation({ token: req.params.token }, req.principal);
    return { data: { success: true } };
  });

  app.get<{ Params: { token: string } }>('/admin/invitations/:token', async (req) => {
    const i = await tenancy.getInvitation({ token: req.params.token }, { requestId: req.id, source: 'admin' });
    return { data: { email: i.email, role: i.role, tenantId: i.tenantId ?? null, status: i.status, expiresAt: i.expiresAt } };
  });

  app.post<{ Params: { token: string }; Body: Infer<typeof InvitationAcceptBody> }>('/admin/invitations/:token/accept', async (req) => {
    const s = await tenancy.acceptInvitation(
      { token: req.params.token, displayName: req.body.display_name, password: req.body.password },
      { requestId: req.id, source: 'admin' },
    );
    return { data: { token: s.token, tokenType: 'Bearer', expiresAt: s.expiresAt, user: adminUserJson(s.user) } };
  });
};

export default invitations;
