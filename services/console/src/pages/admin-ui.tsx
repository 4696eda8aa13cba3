/**
 * What the admin pages share (issue 38, item 9): the one-time secret reveal, a labelled select and checkbox, the
 * model list, and number/date formats. Not a page: pages.ts has no entry for it.
 */
import type { ComponentChildren } from 'preact';
import { useId, useState } from 'preact/hooks';
import { MODEL_IDS } from '../../../../libs/api-schemas/src/vocab';
import { type Answer, networkProblem, type Problem, type paths, problem } from '../api';
import { Button, Dialog, toast } from '../components/ui';
import './admin.css';

export type TenantDetail = Answer<'/admin/tenants/{tenantId}', 'get'>['data'];
export type Tenant = TenantDetail['tenant'];
export type ApiKeyRecord = TenantDetail['apiKeys'][number];
export type CreatedKey = Answer<'/admin/tenants/{tenantId}/api-keys', 'post'>['data'];
export type AdminUser = Answer<'/admin/users', 'get'>['data'][number];
export type Invitation = Answer<'/admin/invitations', 'get'>['data'][number];
export type AdminStats = Answer<'/admin/stats', 'get'>['data'];
export type AdminRole = AdminUser['role'];
export const ROLES: AdminRole[] = ['admin', 'super_admin'];

type CatalogueModel = NonNullable<
  NonNullable<Exclude<paths['/admin/tenants']['post']['requestBody'], undefined>>['content']['application/json']['allowed_models']
>[number];
/** The models a tenant may be allowed (SPEC 1), checked against the catalogue's list both ways at compile time. */
export const MODELS = MODEL_IDS satisfies readonly CatalogueModel[];
const everyModelListed: Exclude<CatalogueModel, (typeof MODELS)[number]> extends never ? true : false = true;
void everyModelListed;

export const fmtDate = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');
export function fmtMb(mb: number): string {
  return mb >= 1024
    ? `${(mb / 1024).toLocaleString(undefined, { maximumFractionDigits: 1 })} GB`
    : `${mb.toLocaleString(undefined, { maximumFractionDigits: 1 })} MB`;
}
/** A number field's value, or undefined when empty or not a whole number (the API then says what is wrong). */
export function intOf(v: string): number | undefined {
  const t = v.trim();
  return t === '' ? undefined : Number(t);
}

/** A provider key pool as typed: keys separated by commas or new lines; never filled from the server. */
export function poolOf(text: string): string[] {
  return text
    .split(/[\n,]/)
    .map((k) => k.trim())
    .filter(Boolean);
}

/** One API write of a form or button: busy meanwhile, its problem kept for the page to show next to it. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [p, setP] = useState<Problem>();
  /** Runs the call; its answer's body when it succeeded, else undefined (and the problem is set). */
  async function run<D>(call: () => Promise<{ data?: D; error?: unknown; response: Response }>): Promise<D | undefined> {
    setBusy(true);
    setP(undefined);
    try {
      const r = await call();
      const err = problem(r);
      if (err || r.data === undefined) return void setP(err);
      return r.data;
    } catch (e) {
      setP(networkProblem(e));
      return undefined;
    } finally {
      setBusy(false);
    }
  }
  return { busy, problem: p, setProblem: setP, run };
}

async function copy(text: string, what: string) {
  try {
    await navigator.clipboard.writeText(text);
    toast(`${what} copied`);
  } catch {
    toast(`Could not copy: select the ${what.toLowerCase()} and copy it by hand`, 'error');
  }
}

/** A copy button for one value (the value itself is shown next to it by the caller). */
export function CopyButton({ text, what }: { text: string; what: string }) {
  return <Button onClick={() => copy(text, what)}>Copy {what.toLowerCase()}</Button>;
}

/**
 * A secret shown once (new API keys, an invitation link): a dialog with each value and its copy button. The caller
 * keeps the values in component state only and drops them on close; nothing is stored.
 */
export function SecretReveal(props: {
  title: string;
  intro: ComponentChildren;
  secrets: { label: string; value: string }[] | undefined;
  onClose: () => void;
}) {
  return (
    <Dialog open={Boolean(props.secrets)} title={props.title} onClose={props.onClose}>
      <p>{props.intro}</p>
      {(props.secrets ?? []).map((s) => (
        <div class="secret" key={s.label}>
          <p>
            <strong>{s.label}</strong>
          </p>
          <code class="secret-value" data-secret>
            {s.value}
          </code>
          <CopyButton text={s.value} what={s.label.startsWith('Invitation') ? 'Link' : 'Key'} />
        </div>
      ))}
    </Dialog>
  );
}

export function Select<T extends string>(props: {
  label: string;
  value: T;
  options: readonly T[] | { value: T; label: string }[];
  onChange: (v: T) => void;
  disabled?: boolean;
}) {
  const id = useId();
  const opts = (props.options as (T | { value: T; label: string })[]).map((o) => (typeof o === 'string' ? { value: o, label: o } : o));
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select id={id} value={props.value} disabled={props.disabled} onChange={(e) => props.onChange(e.currentTarget.value as T)}>
        {opts.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  );
}

/** The note a plain admin sees where super_admin controls are hidden. */
export function SuperAdminNote({ what }: { what: string }) {
  return <p class="muted role-note">Only a super_admin can {what}; the controls are hidden for your role.</p>;
}
