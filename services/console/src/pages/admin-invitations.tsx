/**
 * Invitations (GET /admin/invitations): a super_admin invites an administrator by email and revokes a pending
 * invitation. The link carries the token in its fragment (#inv_...): a fragment is never sent to a server, logged or
 * passed on as a Referer; the accept page reads it and removes it from the address bar.
 */
import { useState } from 'preact/hooks';
import { api, problem } from '../api';
import { Button, ErrorBanner, Field, Table, toast, useLoad } from '../components/ui';
import { BASE } from '../router';
import { isSuperAdmin, useSession } from '../session';
import {
  type AdminRole,
  CopyButton,
  fmtDate,
  type Invitation,
  intOf,
  ROLES,
  SecretReveal,
  Select,
  SuperAdminNote,
  useAction,
} from './admin-ui';

export const inviteLink = (token: string) => `${location.origin}${BASE}/invitation#${token}`;

export default function AdminInvitations() {
  const session = useSession();
  const superAdmin = isSuperAdmin(session);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<AdminRole>('admin');
  const [days, setDays] = useState('');
  const act = useAction();
  const { busy, problem: p } = act;
  const [reveal, setReveal] = useState<{ label: string; value: string }[]>();
  const list = useLoad(async () => {
    const r = await api.GET('/admin/invitations');
    return { value: r.data?.data, problem: problem(r) };
  }, []);

  const create = async (e: Event) => {
    e.preventDefault();
    const d = await act.run(() => api.POST('/admin/invitations', { body: { email: email.trim(), role, expires_in_days: intOf(days) } }));
    if (!d) return;
    setEmail('');
    setDays('');
    setReveal([{ label: `Invitation link for ${d.data.email}`, value: inviteLink(d.data.token) }]);
    list.reload();
  };
  const revoke = async (inv: Invitation) => {
    act.setProblem(undefined);
    const r = await api.DELETE('/admin/invitations/{token}', { params: { path: { token: inv.token } } });
    const err = problem(r);
    if (err) return act.setProblem(err);
    toast(`Invitation for ${inv.email} revoked`);
    list.reload();
  };

  return (
    <>
      <h1>Invitations</h1>
      {superAdmin ? (
        <form class="card" onSubmit={create} noValidate aria-labelledby="inv-title">
          <h2 id="inv-title">Invite an administrator</h2>
          <div class="form-row">
            <Field label="Email" type="email" value={email} onInput={setEmail} required error={p?.fields.email} />
            <Select label="Role" value={role} options={ROLES} onChange={setRole} />
            <Field
              label="Valid for (days)"
              type="number"
              value={days}
              onInput={setDays}
              hint="1-30; empty: 7"
              error={p?.fields.expires_in_days}
            />
          </div>
          <ErrorBanner problem={p} />
          <Button type="submit" variant="primary" busy={busy}>
            Create invitation
          </Button>
        </form>
      ) : (
        <SuperAdminNote what="invite administrators or revoke invitations" />
      )}
      <SecretReveal
        title="Invitation created"
        intro="Send this link to the person invited: it lets them choose a password and sign in. Anyone with the link can accept it."
        secrets={reveal}
        onClose={() => setReveal(undefined)}
      />
      {!superAdmin && <ErrorBanner problem={p} />}
      <ErrorBanner problem={list.problem} />
      <Table
        caption="Invitations"
        rows={list.value ?? []}
        rowKey={(i) => i.token}
        empty={list.loading ? 'Loading…' : 'No invitations.'}
        columns={[
          { label: 'Email', cell: (i) => i.email },
          { label: 'Role', cell: (i) => i.role },
          { label: 'Status', cell: (i) => i.status },
          { label: 'Expires', cell: (i) => fmtDate(i.expiresAt) },
          { label: 'Created', cell: (i) => fmtDate(i.createdAt) },
          ...(superAdmin
            ? [
                {
                  label: 'Actions',
                  cell: (i: Invitation) =>
                    i.status === 'pending' && (
                      <div class="row-actions">
                        <CopyButton text={inviteLink(i.token)} what="Link" />
                        <Button variant="danger" aria-label={`Revoke the invitation for ${i.email}`} onClick={() => revoke(i)}>
                          Revoke
                        </Button>
                      </div>
                    ),
                },
              ]
            : []),
        ]}
      />
    </>
  );
}
