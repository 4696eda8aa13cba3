/** The tenant's overview: its profile (GET /api/profile): name, this month's quota and the rate limit. */
import { api, problem } from '../api';
import { ErrorBanner, useLoad } from '../components/ui';

export default function TenantHome() {
  const profile = useLoad(async () => {
    const r = await api.GET('/api/profile');
    return { value: r.data?.tenant, problem: problem(r) };
  }, []);
  const t = profile.value;
  return (
    <>
      <h1>Overview</h1>
      <ErrorBanner problem={profile.problem} />
      {profile.loading && !t && <p aria-busy="true">Loading…</p>}
      {t && (
        <dl class="facts">
          <div>
            <dt>Tenant</dt>
            <dd>
              {t.tenantName} ({t.tenantId})
            </dd>
          </div>
          <div>
            <dt>Storage this month</dt>
            <dd>
              {t.quotas.monthlyUsedMb.toLocaleString()} MB used of {t.quotas.monthlyQuotaMb.toLocaleString()} MB (
              {t.quotas.monthlyRemainingMb.toLocaleString()} MB left)
            </dd>
          </div>
          <div>
            <dt>Rate limit</dt>
            <dd>{t.quotas.rateLimitPerMinute} requests per minute</dd>
          </div>
        </dl>
      )}
    </>
  );
}
