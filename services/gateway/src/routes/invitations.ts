import { type Infer, InvitationAcceptBody, InvitationBody } from '@imagegen/api-schemas';
import type { Invitation } from '@imagegen/contracts/tenancy/v1/tenancy';
import type { RouteModule } from '../app.js';
import { adminSecurity, tenancyClient } from '../auth.js';
import { wireSchema } from '../validation.js';
import { adminUserJson } from './admin-users.js';

/**
 * A pending invitation's token is a credential: whoever holds it chooses the password of the account it
 * creates, with the invited role. Only a super_admin (who may create invitations anyway) sees tokens in
 * full; an admin sees them abbreviated, like API keys (otherwise an admin could accept a pending
 * super_admin invitation and become super_admin).
 */
export function abbreviateInvitationToken(token: string): string {
  return token.length > 12 ? `${token.slice(0, 8)}...${token.slice(-4)}` : 'inv_...';
}

export function invitationJson(i: Invitation, showToken = true) {
  return {
    token: showToken ? i.token : abbreviateInvitationToken(i.token),
    email: i.email,
    tenantId: i.tenantId ?? null,
    role: i.role,
    status: i.status,
    expiresAt: i.expiresAt,
    createdAt: i.createdAt,
    acceptedAt: i.acceptedAt ?? null,
    revokedAt: i.revokedAt ?? null,
    invitedBy: i.invitedBy ?? null,
  };
}

const tokenParams = {
  type: 'object',
  required: ['token'],
  properties: { token: { type: 'string', minLength: 1, maxLength: 200 } },
};

/**
 * Invitations: create (super_admin), list (admin), revoke (super_admin), and the public acceptance
 * flow: GET /admin/invitations/:token (what is being accepted) and POST /admin/invitations/:token/accept
 * {display_name, password} -> the new user and a session token.
 */
const invitations: RouteModule = (app, { ctx }) => {
  const tenancy = tenancyClient(ctx);

  app.get<{ Querystring: { status?: string } }>(
    '/admin/invitations',
    {
      config: { auth: 'admin' },
      schema: {
        tags: ['admin'],
        summary: 'List invitations (optionally by status); tokens in full for super_admin only',
        security: adminSecurity,
        querystring: {
          type: 'object',
          properties: { status: { type: 'string', enum: ['pending', 'accepted', 'revoked', 'expired'] } },
        },
      },
    },
    async (req) => {
      const r = await tenancy.listInvitations({ status: req.query.status ?? '' }, req.principal);
      const full = req.principal.adminRole === 'super_admin';
      return { data: r.invitations.map((i) => invitationJson(i, full)) };
    },
  );

  app.post<{ Body: Infer<typeof InvitationBody> }>(
    '/admin/invitations',
    {
      config: { auth: 'super_admin' },
      schema: {
        tags: ['admin'],
        summary: 'Invite an admin by email; returns an inv_ token',
        security: adminSecurity,
        body: wireSchema(InvitationBody),
      },
    },
    async (req) => {
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
    },
  );

  app.delete<{ Params: { token: string } }>(
    '/admin/invitations/:token',
    {
      config: { auth: 'super_admin' },
      schema: { tags: ['admin'], summary: 'Revoke a pending invitation', security: adminSecurity, params: tokenParams },
    },
    async (req) => {
      await tenancy.revokeInvitation({ token: req.params.token }, req.principal);
      return { data: { success: true } };
    },
  );

  app.get<{ Params: { token: string } }>(
    '/admin/invitations/:token',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['admin'],
        summary: 'Public: what a pending invitation is for (the token is the credential)',
        params: tokenParams,
      },
    },
    async (req) => {
      const i = await tenancy.getInvitation({ token: req.params.token }, { requestId: req.id, source: 'admin' });
      return { data: { email: i.email, role: i.role, tenantId: i.tenantId ?? null, status: i.status, expiresAt: i.expiresAt } };
    },
  );

  app.post<{ Params: { token: string }; Body: Infer<typeof InvitationAcceptBody> }>(
    '/admin/invitations/:token/accept',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['admin'],
        summary: 'Accept an invitation: creates the admin user and signs in',
        params: tokenParams,
        body: wireSchema(InvitationAcceptBody),
      },
    },
    async (req) => {
      const s = await tenancy.acceptInvitation(
        { token: req.params.token, displayName: req.body.display_name, password: req.body.password },
        { requestId: req.id, source: 'admin' },
      );
      return { data: { token: s.token, tokenType: 'Bearer', expiresAt: s.expiresAt, user: adminUserJson(s.user) } };
    },
  );
};

export default invitations;
