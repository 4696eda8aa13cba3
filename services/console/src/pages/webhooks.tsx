/**
 * Webhooks (issue 38 item 8): the tenant's endpoints; create one (its signing secret is shown once, in a dialog with
 * a copy button, and kept nowhere); send a test; delete. Each endpoint's page has its delivery log and re-enabling.
 */
import { useState } from 'preact/hooks';
import { WEBHOOK_EVENT_TYPES } from '../../../../libs/api-schemas/src/vocab';
import { api, type Problem, problem } from '../api';
import { formatTime, type Webhook, type WebhookCreated } from '../components/api-types';
import { Button, Dialog, ErrorBanner, Field, Table, toast, useLoad } from '../components/ui';
import { Link } from '../router';
import './tenant-pages.css';

/** SPEC 4.11 and issue 37: the event types an endpoint may receive. */
export const EVENT_TYPES: readonly string[] = WEBHOOK_EVENT_TYPES;

export function WebhookState({ w }: { w: Webhook }) {
  return w.enabled ? (
    <span class="status status-ok">enabled</span>
  ) : (
    <span class="status status-bad" title={w.disabledReason ?? undefined}>
      disabled
    </span>
  );
}

/** Queues a webhook.test delivery; says so in a toast or returns the problem. */
export async function sendTest(id: number): Promise<Problem | undefined> {
  const r = await api.POST('/api/webhooks/{id}/test', { params: { path: { id: String(id) } } });
  const p = problem(r);
  if (!p) toast('Test delivery queued');
  return p;
}

export default function Webhooks() {
  const list = useLoad(async () => {
    const r = await api.GET('/api/webhooks');
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const [rowProblem, setRowProblem] = useState<Problem>();
  const [deleting, setDeleting] = useState<Webhook | null>(null);

  async function remove(w: Webhook) {
    const r = await api.DELETE('/api/webhooks/{id}', { params: { path: { id: String(w.id) } } });
    const p = problem(r);
    setRowProblem(p);
    setDeleting(null);
    if (!p) {
      toast('Webhook deleted');
      list.reload();
    }
  }

  return (
    <>
      <h1>Webhooks</h1>
      <div class="toolbar">
        <p class="muted">Signed HTTPS notifications of generations, images and quota events.</p>
        <Button variant="primary" onClick={() => setCreating(true)}>
          New webhook
        </Button>
      </div>
      <ErrorBanner problem={list.problem ?? rowProblem} />
      <Table<Webhook>
        caption="Endpoints"
        rows={list.value ?? []}
        rowKey={(w) => String(w.id)}
        empty={list.loading ? 'Loading…' : 'No webhooks yet.'}
        columns={[
          { label: 'URL', cell: (w) => <Link href={`/webhooks/${w.id}`}>{w.url}</Link> },
          { label: 'State', cell: (w) => <WebhookState w={w} /> },
          { label: 'Events', cell: (w) => (w.events.length === EVENT_TYPES.length ? 'all' : w.events.join(', ')) },
          {
            label: 'Last delivery',
            cell: (w) => (w.lastDeliveryAt ? `${w.lastDeliveryStatus ?? ''} ${formatTime(w.lastDeliveryAt)}` : '—'),
          },
          { label: 'Secret', cell: (w) => <span class="mono">{w.secretHint}</span> },
          {
            label: 'Actions',
            cell: (w) => (
              <div class="row">
                <Button aria-label={`Send test to ${w.url}`} onClick={async () => setRowProblem(await sendTest(w.id))}>
                  Send test
                </Button>
                <Button variant="danger" aria-label={`Delete ${w.url}`} onClick={() => setDeleting(w)}>
                  Delete
                </Button>
              </div>
            ),
          },
        ]}
      />
      {creating && (
        <CreateWebhook
          onClose={() => setCreating(false)}
          onCreated={(w) => {
            setCreating(false);
            setCreated(w);
            list.reload();
          }}
        />
      )}
      {created && <SecretDialog webhook={created} onClose={() => setCreated(null)} />}
      {deleting && (
        <Dialog
          open
          title="Delete this webhook?"
          closeLabel="Cancel"
          focusClose
          onClose={() => setDeleting(null)}
          actions={
            <Button variant="danger" onClick={() => void remove(deleting)}>
              Delete
            </Button>
          }
        >
          <p>{deleting.url} and its delivery log are deleted.</p>
        </Dialog>
      )}
    </>
  );
}

function CreateWebhook(props: { onClose: () => void; onCreated: (w: WebhookCreated) => void }) {
  const [url, setUrl] = useState('https://');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [p, setP] = useState<Problem>();

  async function create(e: Event) {
    e.preventDefault();
    setBusy(true);
    const r = await api.POST('/api/webhooks', {
      body: { url, ...(description ? { description } : {}), ...(events.length ? { events: events as never } : {}) },
    });
    setBusy(false);
    const failed = problem(r);
    setP(failed);
    if (r.data) props.onCreated(r.data.data);
  }
  const urlError = p && (p.fields.url ?? [p.title, ...p.details].find((d) => /url/i.test(d)));
  return (
    <Dialog
      open
      title="New webhook"
      onClose={props.onClose}
      actions={
        <Button variant="primary" type="submit" form="webhook-create" busy={busy}>
          Create
        </Button>
      }
    >
      <form id="webhook-create" onSubmit={create}>
        <Field
          label="Endpoint URL"
          type="url"
          value={url}
          onInput={setUrl}
          required
          max={2048}
          hint="HTTPS, reachable from the internet."
          error={urlError}
        />
        <Field label="Description" value={description} onInput={setDescription} max={500} error={p?.fields.description} />
        <fieldset class="checks">
          <legend>Events (none checked: all of them)</legend>
          {EVENT_TYPES.map((t) => (
            <label key={t}>
              <input
                type="checkbox"
                checked={events.includes(t)}
                onChange={(e) => setEvents(e.currentTarget.checked ? [...events, t] : events.filter((x) => x !== t))}
              />{' '}
              {t}
            </label>
          ))}
        </fieldset>
        <ErrorBanner problem={p} />
      </form>
    </Dialog>
  );
}

/** The signing secret, shown once: copy it now; the console keeps it nowhere. */
function SecretDialog({ webhook, onClose }: { webhook: WebhookCreated; onClose: () => void }) {
  const [copied, setCopied] = useState(false);
  return (
    <Dialog
      open
      title="Webhook created: copy its secret"
      onClose={onClose}
      actions={
        <Button
          variant="primary"
          onClick={async () => {
            try {
              await navigator.clipboard.writeText(webhook.secret);
              setCopied(true);
            } catch {
              toast('Could not copy: select the secret and copy it by hand', 'error');
            }
          }}
        >
          {copied ? 'Copied' : 'Copy secret'}
        </Button>
      }
    >
      <p>
        This is the only time the signing secret of <strong>{webhook.url}</strong> is shown. Store it where your receiver verifies
        signatures.
      </p>
      <p class="secret" data-testid="webhook-secret">
        {webhook.secret}
      </p>
      {copied && <p role="status">Copied to the clipboard.</p>}
    </Dialog>
  );
}
