/**
 * One webhook endpoint (issue 38 item 8): its state (re-enable one disabled after failures: PATCH enabled:true is
 * the tenant's own operation), send a test, and the delivery log with every attempt (refreshed while deliveries are
 * pending); a finished delivery can be sent again (replay, extension of issue 37).
 */
import { useEffect, useState } from 'preact/hooks';
import { api, type Problem, problem } from '../api';
import { type Delivery, formatTime } from '../components/api-types';
import { Button, ErrorBanner, Table, toast, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link } from '../router';
import { sendTest, WebhookState } from './webhooks';
import './tenant-pages.css';

export default function WebhookPage({ params }: PageProps) {
  const id = Number(params.id);
  usePageTitle(`Webhook ${params.id}`);
  const [p, setP] = useState<Problem>();
  const hook = useLoad(async () => {
    const r = await api.GET('/api/webhooks/{id}', { params: { path: { id: String(id) } } });
    return { value: r.data?.data, problem: problem(r) };
  }, [id]);
  const deliveries = useLoad(async () => {
    const r = await api.GET('/api/webhooks/{id}/deliveries', { params: { path: { id: String(id) }, query: { limit: 50 } } });
    return { value: r.data?.data, problem: problem(r) };
  }, [id]);
  const pending = (deliveries.value ?? []).some((d) => d.completedAt === null);
  useEffect(() => {
    if (!pending) return;
    const t = setTimeout(() => {
      deliveries.reload();
      hook.reload();
    }, 1500);
    return () => clearTimeout(t);
  }, [deliveries.value]);

  async function setEnabled(enabled: boolean) {
    const r = await api.PATCH('/api/webhooks/{id}', { params: { path: { id: String(id) } }, body: { enabled } });
    const failed = problem(r);
    setP(failed);
    if (!failed) {
      toast(enabled ? 'Webhook re-enabled' : 'Webhook paused');
      hook.reload();
      deliveries.reload();
    }
  }
  async function test() {
    const failed = await sendTest(id);
    setP(failed);
    deliveries.reload();
  }
  async function replay(d: Delivery) {
    const r = await api.POST('/api/webhooks/{id}/deliveries/{deliveryId}/replay', {
      params: { path: { id: String(id), deliveryId: d.id } },
    });
    const failed = problem(r);
    setP(failed);
    if (!failed) {
      toast('Delivery sent again');
      deliveries.reload();
    }
  }

  const w = hook.value;
  return (
    <>
      <h1>Webhook</h1>
      <p>
        <Link href="/webhooks">All webhooks</Link>
      </p>
      <ErrorBanner problem={hook.problem} />
      {w && (
        <>
          <dl class="facts">
            <div>
              <dt>URL</dt>
              <dd class="mono">{w.url}</dd>
            </div>
            <div>
              <dt>State</dt>
              <dd>
                <WebhookState w={w} />
              </dd>
            </div>
            <div>
              <dt>Events</dt>
              <dd>{w.events.join(', ')}</dd>
            </div>
            <div>
              <dt>Consecutive failures</dt>
              <dd>{w.consecutiveFailures}</dd>
            </div>
            <div>
              <dt>Secret</dt>
              <dd class="mono">{w.secretHint}</dd>
            </div>
            {w.description && (
              <div>
                <dt>Description</dt>
                <dd>{w.description}</dd>
              </div>
            )}
          </dl>
          {!w.enabled && (
            <div class="banner" role="status">
              <p>
                <strong>Disabled{w.disabledReason ? `: ${w.disabledReason}` : ''}.</strong> Deliveries are held. Re-enabling resets the
                failure count and sends the held deliveries at once.
              </p>
            </div>
          )}
          <div class="row">
            {w.enabled ? (
              <Button onClick={() => void setEnabled(false)}>Pause deliveries</Button>
            ) : (
              <Button variant="primary" onClick={() => void setEnabled(true)}>
                Re-enable
              </Button>
            )}
            <Button onClick={() => void test()}>Send test</Button>
            <Button variant="quiet" onClick={() => deliveries.reload()}>
              Refresh log
            </Button>
          </div>
          <ErrorBanner problem={p} />
        </>
      )}
      <h2>Delivery log</h2>
      <ErrorBanner problem={deliveries.problem} />
      <Table<Delivery>
        caption="Deliveries, newest first"
        rows={deliveries.value ?? []}
        rowKey={(d) => d.id}
        empty={deliveries.loading ? 'Loading…' : 'No deliveries yet: send a test.'}
        columns={[
          { label: 'Event', cell: (d) => d.event },
          {
            label: 'Status',
            cell: (d) => (
              <span class={`status ${d.status === 'succeeded' ? 'status-ok' : d.status === 'failed' ? 'status-bad' : ''}`}>{d.status}</span>
            ),
          },
          { label: 'Created', cell: (d) => formatTime(d.createdAt) },
          { label: 'Attempts', cell: (d) => d.attemptCount },
          {
            label: 'Last answer',
            cell: (d) => (d.lastResponseStatus !== null ? `HTTP ${d.lastResponseStatus}` : (d.lastError ?? '—')),
          },
          {
            label: 'Attempt log',
            cell: (d) =>
              d.attempts.length === 0 ? (
                '—'
              ) : (
                <details>
                  <summary>{d.attempts.length} attempt(s)</summary>
                  <ol>
                    {d.attempts.map((a) => (
                      <li key={a.attempt}>
                        {formatTime(a.attemptedAt)}: {a.responseStatus !== null ? `HTTP ${a.responseStatus}` : (a.error ?? 'no answer')} in{' '}
                        {a.durationMs} ms
                      </li>
                    ))}
                  </ol>
                </details>
              ),
          },
          {
            label: 'Actions',
            cell: (d) =>
              d.completedAt ? (
                <Button aria-label={`Send again: delivery ${d.id}`} onClick={() => void replay(d)}>
                  Send again
                </Button>
              ) : (
                '—'
              ),
          },
        ]}
      />
    </>
  );
}
