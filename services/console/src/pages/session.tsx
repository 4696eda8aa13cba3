/** One session (issue 38 item 6): its record, images, executions with their logs, and the live log of running ones. */
import { api, problem } from '../api';
import { type ExecutionDetail, formatTime } from '../components/api-types';
import { useLiveStream } from '../components/live-stream';
import { ErrorBanner, Table, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link } from '../router';
import { LogList, StatusBadge } from './execution';
import './tenant-pages.css';

export default function Session({ params }: PageProps) {
  const sessionId = params.id;
  usePageTitle(`Session ${sessionId}`);
  const path = { sessionId };
  const detail = useLoad(async () => {
    const r = await api.GET('/api/sessions/{sessionId}', { params: { path } });
    return { value: r.data?.data, problem: problem(r) };
  }, [sessionId]);
  const logs = useLoad(async () => {
    const r = await api.GET('/api/sessions/{sessionId}/logs', { params: { path, query: { limit: 50 } } });
    return { value: r.data?.executions, problem: problem(r) };
  }, [sessionId]);
  const live = useLiveStream(detail.value ? `/api/sessions/${encodeURIComponent(sessionId)}/logs/stream` : null, false, () =>
    logs.reload(),
  );

  const images = detail.value?.images ?? [];
  return (
    <>
      <h1>Session</h1>
      <p class="mono">{sessionId}</p>
      <ErrorBanner problem={detail.problem} />
      {detail.value && (
        <dl class="facts">
          <div>
            <dt>Active</dt>
            <dd>{detail.value.session.is_active ? 'yes' : 'no'}</dd>
          </div>
          <div>
            <dt>Started</dt>
            <dd>{formatTime(detail.value.session.created_at)}</dd>
          </div>
          <div>
            <dt>Last activity</dt>
            <dd>{formatTime(detail.value.session.last_activity_at)}</dd>
          </div>
          <div>
            <dt>Images</dt>
            <dd>{images.length}</dd>
          </div>
        </dl>
      )}
      {images.length > 0 && (
        <section aria-labelledby="session-images">
          <h2 id="session-images">Images</h2>
          <ul class="thumbs">
            {images.map((im) => (
              <li key={im.id}>
                <Link href={`/images/${im.id}`} aria-label={`Image ${im.id}: ${im.prompt.slice(0, 60)}`}>
                  <img
                    src={im.thumbnailUrl}
                    alt=""
                    width={120}
                    height={Math.round((120 * im.height) / Math.max(1, im.width))}
                    loading="lazy"
                  />
                </Link>
              </li>
            ))}
          </ul>
        </section>
      )}
      <section aria-labelledby="session-live">
        <h2 id="session-live">Live log</h2>
        <p class="muted" role="status">
          {live.state === 'live'
            ? 'Following the running executions of this session.'
            : live.state === 'lost'
              ? 'The live log was interrupted.'
              : 'Connecting…'}
        </p>
        {live.error && <ErrorBanner problem={{ status: 0, title: live.error, details: [], fields: {} }} />}
        {live.logs.length > 0 && <LogList entries={live.logs} label="Live log lines" />}
      </section>
      <ErrorBanner problem={logs.problem} />
      <Table<ExecutionDetail>
        caption="Executions, newest first"
        rows={logs.value ?? []}
        rowKey={(e) => e.executionId}
        empty={logs.loading ? 'Loading…' : 'No executions in this session.'}
        columns={[
          { label: 'Execution', cell: (e) => <Link href={`/executions/${encodeURIComponent(e.executionId)}`}>{e.toolName}</Link> },
          { label: 'Status', cell: (e) => <StatusBadge status={e.status} /> },
          { label: 'Started', cell: (e) => formatTime(e.startedAt) },
          { label: 'Duration', cell: (e) => (e.durationMs === null ? '—' : `${(e.durationMs / 1000).toFixed(1)} s`) },
          { label: 'Log lines', cell: (e) => e.logEntries.length },
          { label: 'Result', cell: (e) => e.error ?? e.resultSummary ?? '—' },
        ]}
      />
    </>
  );
}
