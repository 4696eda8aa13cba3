/** The administrator's dashboard (GET /admin/stats): tenants, images, storage, top tenants, service health. */
import { api, problem } from '../api';
import { Button, ErrorBanner, Table, useLoad } from '../components/ui';
import { Link } from '../router';
import { fmtDate, fmtMb } from './admin-ui';

export default function AdminStats() {
  const stats = useLoad(async () => {
    const r = await api.GET('/admin/stats');
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const s = stats.value;
  return (
    <>
      <h1>Dashboard</h1>
      <ErrorBanner problem={stats.problem} />
      {stats.loading && !s && <p aria-busy="true">Loading…</p>}
      {s && (
        <>
          <p class="muted">
            As of {fmtDate(s.generatedAt)}{' '}
            <Button variant="quiet" onClick={stats.reload} busy={stats.loading}>
              Refresh
            </Button>
          </p>
          {s.usage.status !== 'ok' && (
            <p class="banner banner-error">Usage figures are unavailable right now{s.usage.error ? `: ${s.usage.error}` : ''}.</p>
          )}
          <div class="admin-grid">
            <section class="card" aria-labelledby="st-tenants">
              <h2 id="st-tenants">Tenants</h2>
              <p class="stat">{s.tenants.total.toLocaleString()}</p>
              <p>
                {s.tenants.active.toLocaleString()} active, {s.tenants.inactive.toLocaleString()} inactive;{' '}
                {s.tenants.createdLast30Days.toLocaleString()} new in 30 days
              </p>
            </section>
            <section class="card" aria-labelledby="st-images">
              <h2 id="st-images">Images</h2>
              <p class="stat">{s.images ? s.images.total.toLocaleString() : '—'}</p>
              <p>{s.images ? `${s.images.last24h.toLocaleString()} in the last 24 hours` : 'not available'}</p>
            </section>
            <section class="card" aria-labelledby="st-storage">
              <h2 id="st-storage">Storage</h2>
              <p class="stat">{s.storage ? fmtMb(s.storage.totalMb) : '—'}</p>
              <p>
                {s.recentActivity
                  ? `${s.recentActivity.operationsLast24h.toLocaleString()} operations in the last 24 hours`
                  : 'recent activity not available'}
              </p>
            </section>
            <section class="card" aria-labelledby="st-health">
              <h2 id="st-health">Service health</h2>
              <p class={`stat status-${s.health.status}`}>{s.health.status === 'ok' ? 'All up' : 'Degraded'}</p>
            </section>
          </div>
          <Table
            caption="Top tenants by storage"
            rows={s.topTenants}
            rowKey={(t) => t.tenantId}
            empty="No usage yet."
            columns={[
              {
                label: 'Tenant',
                cell: (t) => <Link href={`/admin/tenants/${encodeURIComponent(t.tenantId)}`}>{t.tenantName ?? t.tenantId}</Link>,
              },
              { label: 'Images', cell: (t) => t.images.toLocaleString() },
              { label: 'Storage', cell: (t) => fmtMb(t.mb) },
            ]}
          />
          <Table
            caption="Services"
            rows={s.health.services}
            rowKey={(x) => x.name}
            columns={[
              { label: 'Service', cell: (x) => x.name },
              { label: 'Status', cell: (x) => <span class={`status-${x.status}`}>{x.status.replace('_', ' ')}</span> },
              { label: 'Latency', cell: (x) => (x.latencyMs === null ? '—' : `${x.latencyMs} ms`) },
              { label: 'Error', cell: (x) => x.error ?? '' },
            ]}
          />
        </>
      )}
    </>
  );
}
