/** Admin users (GET /admin/users): roles, activation and unlocking, for a super_admin; a plain admin reads the list. */
import { useState } from 'preact/hooks';
import { api, type Problem, problem } from '../api';
import { Button, ErrorBanner, Table, toast, useLoad } from '../components/ui';
import { isSuperAdmin, useSession } from '../session';
import { type AdminRole, type AdminUser, fmtDate, ROLES, SuperAdminNote } from './admin-ui';

export default function AdminUsers() {
  const session = useSession();
  const superAdmin = isSuperAdmin(session);
  const [p, setP] = useState<Problem>();
  const [busy, setBusy] = useState<string>();
  const list = useLoad(async () => {
    const r = await api.GET('/admin/users');
    return { value: r.data?.data, problem: problem(r) };
  }, []);

  const act = async (u: AdminUser, what: string, run: () => Promise<{ error?: unknown; response: Response }>) => {
    setBusy(u.userId);
    setP(undefined);
    const r = await run();
    setBusy(undefined);
    const err = problem(r);
    if (err) return setP(err);
    toast(`${u.email}: ${what}`);
    list.reload();
  };
  const patch = (u: AdminUser, body: { role?: AdminRole; is_active?: boolean }, what: string) =>
    act(u, what, () => api.PATCH('/admin/users/{userId}', { params: { path: { userId: u.userId } }, body }));

  return (
    <>
      <h1>Admin users</h1>
      {!superAdmin && <SuperAdminNote what="change roles, activate or unlock admin users" />}
      <p class="muted">New administrators join through an invitation.</p>
      <ErrorBanner problem={p ?? list.problem} />
      <Table
        caption="Administrators"
        rows={list.value ?? []}
        rowKey={(u) => u.userId}
        empty={list.loading ? 'Loading…' : 'No admin users.'}
        columns={[
          { label: 'Email', cell: (u) => u.email },
          { label: 'Name', cell: (u) => u.displayName },
          {
            label: 'Role',
            cell: (u) =>
              superAdmin ? (
                <select
                  aria-label={`Role of ${u.email}`}
                  value={u.role}
                  disabled={busy === u.userId}
                  onChange={(e) => patch(u, { role: e.currentTarget.value as AdminRole }, `role ${e.currentTarget.value}`)}
                >
                  {ROLES.map((r) => (
                    <option key={r} value={r}>
                      {r}
                    </option>
                  ))}
                </select>
              ) : (
                u.role
              ),
          },
          { label: 'Status', cell: (u) => `${u.isActive ? 'active' : 'inactive'}${u.isLocked ? ', locked' : ''}` },
          { label: 'Last sign-in', cell: (u) => fmtDate(u.lastLoginAt) },
          ...(superAdmin
            ? [
                {
                  label: 'Actions',
                  cell: (u: AdminUser) => (
                    <div class="row-actions">
                      <Button
                        variant={u.isActive ? 'danger' : 'primary'}
                        busy={busy === u.userId}
                        aria-label={`${u.isActive ? 'Deactivate' : 'Activate'} ${u.email}`}
                        onClick={() => patch(u, { is_active: !u.isActive }, u.isActive ? 'deactivated' : 'activated')}
                      >
                        {u.isActive ? 'Deactivate' : 'Activate'}
                      </Button>
                      {u.isLocked && (
                        <Button
                          busy={busy === u.userId}
                          aria-label={`Unlock ${u.email}`}
                          onClick={() =>
                            act(u, 'unlocked', () => api.POST('/admin/users/{userId}/unlock', { params: { path: { userId: u.userId } } }))
                          }
                        >
                          Unlock
                        </Button>
                      )}
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
