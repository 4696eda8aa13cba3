/** The administrator's home: who is signed in (GET /admin/me) and the role's powers. */
import { api, problem } from '../api';
import { ErrorBanner, useLoad } from '../components/ui';

export default function AdminHome() {
  const me = useLoad(async () => {
    const r = await api.GET('/admin/me');
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const v = me.value;
  return (
    <>
      <h1>Administration</h1>
      <ErrorBanner problem={me.problem} />
      {me.loading && !v && <p aria-busy="true">Loading…</p>}
      {v && (
        <dl class="facts">
          <div>
            <dt>Signed in as</dt>
            <dd>{v.user?.email ?? '(admin token)'}</dd>
          </div>
          <div>
            <dt>Role</dt>
            <dd>{v.role}</dd>
          </div>
          <div>
            <dt>Session ends</dt>
            <dd>{v.sessionExpiresAt ? new Date(v.sessionExpiresAt).toLocaleString() : '—'}</dd>
          </div>
        </dl>
      )}
      {v && v.role !== 'super_admin' && <p class="muted">Changes to tenants, keys and admin users need a super_admin.</p>}
    </>
  );
}
