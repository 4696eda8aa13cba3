/**
 * One tenant (GET /admin/tenants/:tenantId): its settings and API keys. A super_admin edits quota, rate limit,
 * models and provider keys (write-only: a stored key is never shown, only how many are configured), activates or
 * deactivates it, creates keys (shown once, with a copy button) and revokes them.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, problem } from '../api';
import { Button, Check, ErrorBanner, Field, Table, toast, useConfirm, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link } from '../router';
import { isSuperAdmin, useSession } from '../session';
import {
  type ApiKeyRecord,
  fmtDate,
  fmtMb,
  intOf,
  MODELS,
  poolOf,
  SecretReveal,
  Select,
  SuperAdminNote,
  type TenantDetail,
  useAction,
} from './admin-ui';

type Model = (typeof MODELS)[number];
type Provider = 'provA' | 'provB';

function EditTenant({ detail, onSaved }: { detail: TenantDetail; onSaved: (d: TenantDetail) => void }) {
  const t = detail.tenant;
  const [name, setName] = useState(t.tenantName);
  const [email, setEmail] = useState(t.contactEmail);
  const [quota, setQuota] = useState(String(t.monthlyQuotaMb));
  const [rate, setRate] = useState(String(t.rateLimitPerMinute));
  const [model, setModel] = useState(t.modelId as Model);
  const [allowed, setAllowed] = useState<string[]>(t.allowedModels);
  const [notes, setNotes] = useState(t.notes ?? '');
  const [pool, setPool] = useState<Record<Provider, string>>({ provA: '', provB: '' });
  const [remove, setRemove] = useState<Record<Provider, boolean>>({ provA: false, provB: false });
  const act = useAction();
  const { busy, problem: p } = act;

  const submit = async (e: Event) => {
    e.preventDefault();
    const creds: { provA?: string[] | null; provB?: string[] | null } = {};
    for (const prov of ['provA', 'provB'] as const) {
      if (remove[prov]) creds[prov] = null;
      else if (poolOf(pool[prov]).length) creds[prov] = poolOf(pool[prov]);
    }
    const d = await act.run(() =>
      api.PATCH('/admin/tenants/{tenantId}', {
        params: { path: { tenantId: t.tenantId } },
        body: {
          tenant_name: name.trim(),
          contact_email: email.trim(),
          monthly_quota_mb: intOf(quota),
          rate_limit_per_minute: intOf(rate),
          model_id: model,
          allowed_models: allowed as Model[],
          notes: notes.trim() ? notes : null,
          provider_credentials: Object.keys(creds).length ? creds : undefined,
        },
      }),
    );
    if (!d) return;
    // The typed keys are dropped at once: they live on the server only.
    setPool({ provA: '', provB: '' });
    setRemove({ provA: false, provB: false });
    toast('Tenant saved');
    onSaved(d.data);
  };

  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="edit-title">
      <h2 id="edit-title">Settings</h2>
      <div class="form-row">
        <Field label="Name" value={name} onInput={setName} max={200} error={p?.fields.tenant_name} />
        <Field label="Contact email" type="email" value={email} onInput={setEmail} error={p?.fields.contact_email} />
        <Field label="Monthly quota (MB)" type="number" value={quota} onInput={setQuota} error={p?.fields.monthly_quota_mb} />
        <Field label="Rate limit per minute" type="number" value={rate} onInput={setRate} error={p?.fields.rate_limit_per_minute} />
        <Select label="Default model" value={model} options={MODELS} onChange={setModel} />
      </div>
      <fieldset class="plain">
        <legend>Allowed models</legend>
        {MODELS.map((m) => (
          <Check
            key={m}
            label={m}
            checked={allowed.includes(m)}
            onChange={(on) => setAllowed(on ? [...allowed, m] : allowed.filter((x) => x !== m))}
          />
        ))}
        {p?.fields.allowed_models && (
          <p class="field-error" role="alert">
            {p.fields.allowed_models}
          </p>
        )}
      </fieldset>
      <Field label="Notes" value={notes} onInput={setNotes} max={2000} multiline rows={2} error={p?.fields.notes} />
      {(['provA', 'provB'] as const).map((prov) => (
        <fieldset class="plain" key={prov}>
          <legend>{prov} keys</legend>
          <p class="muted">
            {detail.providerCredentials[prov].configured
              ? `${detail.providerCredentials[prov].keyCount} key(s) configured (never shown).`
              : 'None configured: the platform keys are used.'}
          </p>
          <Field
            label={`New ${prov} keys (replace the pool)`}
            type="password"
            autoComplete="new-password"
            value={pool[prov]}
            onInput={(v) => setPool({ ...pool, [prov]: v })}
            hint="Separate keys with commas; empty: unchanged"
            error={p?.fields.provider_credentials}
          />
          {detail.providerCredentials[prov].configured && (
            <Check label={`Remove the ${prov} pool`} checked={remove[prov]} onChange={(v) => setRemove({ ...remove, [prov]: v })} />
          )}
        </fieldset>
      ))}
      <ErrorBanner problem={p} />
      <Button type="submit" variant="primary" busy={busy}>
        Save settings
      </Button>
    </form>
  );
}

function ApiKeys({ detail, superAdmin, onChange }: { detail: TenantDetail; superAdmin: boolean; onChange: () => void }) {
  const tenantId = detail.tenant.tenantId;
  const [keyName, setKeyName] = useState('');
  const [type, setType] = useState<'live' | 'test'>('live');
  const act = useAction();
  const { busy, problem: p } = act;
  const [reveal, setReveal] = useState<{ label: string; value: string }[]>();
  const confirm = useConfirm();

  const create = async (e: Event) => {
    e.preventDefault();
    const d = await act.run(() =>
      api.POST('/admin/tenants/{tenantId}/api-keys', {
        params: { path: { tenantId } },
        body: { key_name: keyName.trim(), type },
      }),
    );
    if (!d) return;
    setKeyName('');
    setReveal([{ label: `API key ${d.data.keyName} (${d.data.type})`, value: d.data.apiKey }]);
    onChange();
  };
  const revoke = async (k: ApiKeyRecord) => {
    const sure = await confirm.ask({
      title: `Revoke the key ${k.keyName}?`,
      body: <p>Requests with it are refused within seconds. A revoked key cannot be used again.</p>,
      confirmLabel: 'Revoke key',
    });
    if (!sure) return;
    const r = await api.DELETE('/admin/tenants/{tenantId}/api-keys/{keyRef}', { params: { path: { tenantId, keyRef: k.keyId } } });
    const err = problem(r);
    if (err) return act.setProblem(err);
    toast(`Key ${k.keyName} revoked`);
    onChange();
  };

  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      {confirm.dialog}
      <SecretReveal
        title="New API key"
        intro="Copy it now: this is the only time the full key is shown. The service keeps only its hash."
        secrets={reveal}
        onClose={() => setReveal(undefined)}
      />
      <ErrorBanner problem={p} />
      <Table
        caption={`Keys of ${tenantId}`}
        rows={detail.apiKeys}
        rowKey={(k) => k.keyId}
        empty="No keys."
        columns={[
          { label: 'Name', cell: (k) => k.keyName },
          { label: 'Key', cell: (k) => <code>{k.apiKey}</code> },
          { label: 'Type', cell: (k) => k.type },
          { label: 'Status', cell: (k) => (k.isActive ? 'active' : `revoked ${fmtDate(k.revokedAt)}`) },
          { label: 'Last used', cell: (k) => fmtDate(k.lastUsedAt) },
          { label: 'Requests', cell: (k) => k.usageCount.toLocaleString() },
          ...(superAdmin
            ? [
                {
                  label: 'Actions',
                  cell: (k: ApiKeyRecord) =>
                    k.isActive && (
                      <Button variant="danger" onClick={() => revoke(k)} aria-label={`Revoke ${k.keyName}`}>
                        Revoke
                      </Button>
                    ),
                },
              ]
            : []),
        ]}
      />
      {superAdmin && (
        <form class="card" onSubmit={create} noValidate aria-labelledby="newkey-title">
          <h3 id="newkey-title">Create a key</h3>
          <div class="form-row">
            <Field label="Key name" value={keyName} onInput={setKeyName} max={100} required error={p?.fields.key_name} />
            <Select label="Key type" value={type} options={['live', 'test'] as const} onChange={setType} />
          </div>
          <Button type="submit" variant="primary" busy={busy}>
            Create key
          </Button>
        </form>
      )}
    </section>
  );
}

export default function AdminTenant({ params }: PageProps) {
  const tenantId = params.tenantId ?? '';
  usePageTitle(`Tenant ${tenantId}`);
  const session = useSession();
  const superAdmin = isSuperAdmin(session);
  const [detail, setDetail] = useState<TenantDetail>();
  const act = useAction();
  const { busy, problem: p } = act;
  const confirm = useConfirm();
  const load = useLoad(async () => {
    const r = await api.GET('/admin/tenants/{tenantId}', { params: { path: { tenantId } } });
    return { value: r.data?.data, problem: problem(r) };
  }, [tenantId]);
  useEffect(() => setDetail(load.value), [load.value]);

  const setActive = async (active: boolean) => {
    const sure =
      active ||
      (await confirm.ask({
        title: `Deactivate ${tenantId}?`,
        body: <p>Its API keys and console sessions are refused until it is activated again.</p>,
        confirmLabel: 'Deactivate',
      }));
    if (!sure) return;
    const d = await act.run(() => api.PATCH('/admin/tenants/{tenantId}', { params: { path: { tenantId } }, body: { is_active: active } }));
    if (!d) return;
    setDetail(d.data);
    toast(`${tenantId} ${active ? 'activated' : 'deactivated'}`);
  };

  const t = detail?.tenant;
  return (
    <>
      <p>
        <Link href="/admin/tenants">← Tenants</Link>
      </p>
      <h1>Tenant {tenantId}</h1>
      {confirm.dialog}
      <ErrorBanner problem={load.problem} />
      {load.loading && !detail && <p aria-busy="true">Loading…</p>}
      {t && detail && (
        <>
          <dl class="facts">
            <div>
              <dt>Name</dt>
              <dd>{t.tenantName}</dd>
            </div>
            <div>
              <dt>Status</dt>
              <dd>{t.isActive ? 'active' : 'inactive'}</dd>
            </div>
            <div>
              <dt>Contact</dt>
              <dd>{t.contactEmail}</dd>
            </div>
            <div>
              <dt>Quota</dt>
              <dd>{fmtMb(t.monthlyQuotaMb)} / month</dd>
            </div>
            <div>
              <dt>Rate limit</dt>
              <dd>{t.rateLimitPerMinute.toLocaleString()} / min</dd>
            </div>
            <div>
              <dt>Models</dt>
              <dd>
                {t.allowedModels.join(', ')} (default {t.modelId})
              </dd>
            </div>
            <div>
              <dt>Provider keys</dt>
              <dd>
                provA: {detail.providerCredentials.provA.keyCount}, provB: {detail.providerCredentials.provB.keyCount}
              </dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>{fmtDate(t.createdAt)}</dd>
            </div>
          </dl>
          <ErrorBanner problem={p} />
          {superAdmin ? (
            <p>
              {t.isActive ? (
                <Button variant="danger" busy={busy} onClick={() => setActive(false)}>
                  Deactivate tenant
                </Button>
              ) : (
                <Button variant="primary" busy={busy} onClick={() => setActive(true)}>
                  Activate tenant
                </Button>
              )}
            </p>
          ) : (
            <SuperAdminNote what="change a tenant, its keys or its activation" />
          )}
          {superAdmin && <EditTenant key={t.updatedAt} detail={detail} onSaved={setDetail} />}
          <ApiKeys detail={detail} superAdmin={superAdmin} onChange={load.reload} />
        </>
      )}
    </>
  );
}
