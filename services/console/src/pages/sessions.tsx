/** Sessions (issue 38 item 6): the tenant's sessions, most recently active first, paged by cursor; and running executions. */
import { api, problem } from '../api';
import { formatBytes, formatTime, type SessionSummary } from '../components/api-types';
import { Button, ErrorBanner, Table, useLoad } from '../components/ui';
import type { PageProps } from '../pages';
import { Link, setQuery } from '../router';
import './tenant-pages.css';

export default function Sessions({ query }: PageProps) {
  const cursor = query.get('cursor') ?? undefined;
  const list = useLoad(async () => {
    const r = await api.GET('/api/sessions', { params: { query: { limit: 20, ...(cursor ? { cursor } : {}) } } });
    return { value: r.data, problem: problem(r) };
  }, [cursor]);
  const active = useLoad(async () => {
    const r = await api.GET('/api/executions/active', { params: { query: { limit: 20 } } });
    return { value: r.data?.executions, problem: problem(r) };
  }, []);

  return (
    <>
      <h1>Sessions</h1>
      <ErrorBanner problem={active.problem} />
      <Table
        caption="Running executions"
        rows={active.value ?? []}
        rowKey={(e) => e.executionId}
        empty={active.loading ? 'Loading…' : 'Nothing is running.'}
        columns={[
          { label: 'Execution', cell: (e) => <Link href={`/executions/${encodeURIComponent(e.executionId)}`}>{e.toolName}</Link> },
          { label: 'Status', cell: (e) => `${e.status} ${e.progressPercent}%` },
          { label: 'Step', cell: (e) => e.currentStep ?? '—' },
          { label: 'Started', cell: (e) => formatTime(e.startedAt) },
        ]}
      />
      <ErrorBanner problem={list.problem} />
      <Table<SessionSummary>
        caption="Sessions, most recently active first"
        rows={list.value?.data ?? []}
        rowKey={(s) => s.sessionId}
        empty={list.loading ? 'Loading…' : 'No sessions yet: generate an image to start one.'}
        columns={[
          {
            label: 'Session',
            cell: (s) => (
              <Link href={`/sessions/${encodeURIComponent(s.sessionId)}`} class="mono">
                {s.sessionId}
              </Link>
            ),
          },
          { label: 'Active', cell: (s) => (s.isActive ? 'yes' : 'no') },
          { label: 'Last activity', cell: (s) => formatTime(s.lastActivityAt) },
          { label: 'Images', cell: (s) => s.totalImages },
          { label: 'Edits', cell: (s) => s.totalEdits },
          { label: 'Stored', cell: (s) => formatBytes(s.totalBytes) },
        ]}
      />
      <div class="row">
        {cursor && <Button onClick={() => setQuery({ cursor: undefined })}>First page</Button>}
        {list.value?.pagination.nextCursor && (
          <Button onClick={() => setQuery({ cursor: list.value?.pagination.nextCursor ?? undefined }, { push: true })}>Next page</Button>
        )}
      </div>
    </>
  );
}
