/** Tenants (GET /admin/tenants): list and search; a super_admin creates one and sees its new API keys once. */
import { useState } from 'preact/hooks';
import { api, problem } from '../api';
import { Button, ErrorBanner, Field, Table, toast, useLoad } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, setQuery } from '../router';
import { isSuperAdmin, useSession } from '../session';
import { fmtDate, fmtMb, intOf, poolOf, SecretReveal, SuperAdminNote, useAction } from './admin-ui';

function CreateTenant({ onCreated }: { onCreated: (tenantId: string, keys: { label: string; value: string }[]) => void }) {
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [quota, setQuota] = useState('');
  const [rate, setRate] = useState('');
  const [keyName, setKeyName] = useState('default');
  // Provider keys: typed here, sent once, never shown again (the tenant page only says how many are configured).
  const [provA, setProvA] = useState('');
  const [provB, setProvB] = useState('');
  const act = useAction();
  const { busy, problem: p } = act;
  const submit = async (e: Event) => {
    e.preventDefault();
    const d = await act.run(() =>
      api.POST('/admin/tenants', {
        body: {
          tenant_id: id.trim(),
          tenant_name: name.trim(),
          contact_email: email.trim(),
          monthly_quota_mb: intOf(quota),
          rate_limit_per_minute: intOf(rate),
          api_keys: keyName.trim() ? [{ key_name: keyName.trim() }] : undefined,
          provider_credentials: {
            provA: poolOf(provA).length ? poolOf(provA) : undefined,
            provB: poolOf(provB).length ? poolOf(provB) : undefined,
          },
        },
      }),
    );
    if (!d) return;
    const t = d.data;
    setId('');
    setName('');
    setEmail('');
    setQuota('');
    setRate('');
    setProvA('');
    setProvB('');
    toast(`Tenant ${t.tenant.tenantId} created`);
    onCreated(
      t.tenant.tenantId,
      t.apiKeys.map((k) => ({ label: `API key ${k.keyName} (${k.type})`, value: k.apiKey })),
    );
  };
  return (
    <details class="card">
      <summary>Create a tenant</summary>
      <form onSubmit={submit} noValidate>
        <div class="form-row">
          <Field label="Tenant id" value={id} onInput={setId} max={64} required error={p?.fields.tenant_id} />
          <Field label="Name" value={name} onInput={setName} max={200} required error={p?.fields.tenant_name} />
          <Field label="Contact email" type="email" value={email} onInput={setEmail} required error={p?.fields.contact_email} />
          <Field
            label="Monthly quota (MB)"
            type="number"
            value={quota}
            onInput={setQuota}
            hint="Empty: the default"
            error={p?.fields.monthly_quota_mb}
          />
          <Field
            label="Rate limit per minute"
            type="number"
            value={rate}
            onInput={setRate}
            hint="Empty: the default"
            error={p?.fields.rate_limit_per_minute}
          />
          <Field
            label="provA keys"
            type="password"
            autoComplete="new-password"
            value={provA}
            onInput={setProvA}
            hint="Comma-separated; at least one provider key"
            error={p?.fields['provider_credentials.provA']}
          />
          <Field
            label="provB keys"
            type="password"
            autoComplete="new-password"
            value={provB}
            onInput={setProvB}
            hint="Comma-separated"
            error={p?.fields['provider_credentials.provB']}
          />
          <Field
            label="First API key name"
            value={keyName}
            onInput={setKeyName}
            max={100}
            hint="Empty: one live key named by the service"
          />
        </div>
        <ErrorBanner problem={p} />
        <Button type="submit" variant="primary" busy={busy}>
          Create tenant
        </Button>
      </form>
    </details>
  );
}

export default function AdminTenants({ query }: PageProps) {
  const session = useSession();
  const q = query.get('q') ?? '';
  const [reveal, setReveal] = useState<{ tenantId: string; keys: { label: string; value: string }[] }>();
  const list = useLoad(async () => {
    const r = await api.GET('/admin/tenants');
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const needle = q.trim().toLowerCase();
  const rows = (list.value ?? []).filter(
    (t) => !needle || [t.tenantId, t.tenantName, t.contactEmail].some((x) => x.toLowerCase().includes(needle)),
  );
  return (
    <>
      <h1>Tenants</h1>
      {isSuperAdmin(session) ? (
        <CreateTenant
          onCreated={(tenantId, keys) => {
            setReveal({ tenantId, keys });
            list.reload();
          }}
        />
      ) : (
        <SuperAdminNote what="create or change tenants" />
      )}
      <SecretReveal
        title="The new tenant's API keys"
        intro="Copy them now: this is the only time the full keys are shown. The service keeps only their hashes."
        secrets={reveal?.keys}
        onClose={() => setReveal(undefined)}
      />
      <search>
        <Field label="Search tenants" type="search" value={q} onInput={(v) => setQuery({ q: v })} hint="By id, name or contact email" />
      </search>
      <ErrorBanner problem={list.problem} />
      {list.loading && !list.value ? (
        <p aria-busy="true">Loading…</p>
      ) : (
        <Table
          caption={`Tenants (${rows.length}${needle ? ` of ${list.value?.length ?? 0}` : ''})`}
          rows={rows}
          rowKey={(t) => t.tenantId}
          empty={needle ? 'No tenant matches.' : 'No tenants yet.'}
          columns={[
            { label: 'Tenant', cell: (t) => <Link href={`/admin/tenants/${encodeURIComponent(t.tenantId)}`}>{t.tenantId}</Link> },
            { label: 'Name', cell: (t) => t.tenantName },
            { label: 'Status', cell: (t) => (t.isActive ? 'active' : 'inactive') },
            { label: 'Quota', cell: (t) => `${fmtMb(t.monthlyQuotaMb)} / month` },
            { label: 'Rate', cell: (t) => `${t.rateLimitPerMinute.toLocaleString()} / min` },
            { label: 'Created', cell: (t) => fmtDate(t.createdAt) },
          ]}
        />
      )}
    </>
  );
}
