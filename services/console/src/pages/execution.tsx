/**
 * One execution (issue 38 item 6): status, progress, step, result and its log, followed live from the execution
 * stream until it completes or fails; a queued or running one can be cancelled.
 */
import { useState } from 'preact/hooks';
import { api, type Problem, problem } from '../api';
import { formatTime, type LogEntryLike } from '../components/api-types';
import { useLiveStream } from '../components/live-stream';
import { Button, ErrorBanner, toast, useLoad, usePageTitle } from '../components/ui';
import type { PageProps } from '../pages';
import { Link } from '../router';
import './tenant-pages.css';

const FINISHED = new Set(['completed', 'failed', 'cancelled']);

export function StatusBadge({ status }: { status: string }) {
  const cls = status === 'completed' ? 'status-ok' : status === 'failed' || status === 'cancelled' ? 'status-bad' : '';
  return <span class={`status ${cls}`}>{status}</span>;
}

export function LogList({ entries, label }: { entries: LogEntryLike[]; label: string }) {
  return (
    <ol class="logs" aria-label={label}>
      {entries.map((l, i) => (
        <li key={`${l.timestamp}-${i}`} class={`log-${l.level}`}>
          <time dateTime={l.timestamp}>{new Date(l.timestamp).toLocaleTimeString()}</time> [{l.level}] {l.message}
        </li>
      ))}
    </ol>
  );
}

export default function Execution({ params }: PageProps) {
  const executionId = params.id;
  usePageTitle(`Execution ${executionId}`);
  const [cancelProblem, setCancelProblem] = useState<Problem>();
  const one = useLoad(async () => {
    const r = await api.GET('/api/executions/{executionId}', { params: { path: { executionId } } });
    return { value: r.data?.execution, problem: problem(r) };
  }, [executionId]);
  const e = one.value;
  const running = e !== undefined && !FINISHED.has(e.status);
  const live = useLiveStream(running ? `/api/executions/${encodeURIComponent(executionId)}/stream` : null, true, () => one.reload());
  const st = live.status[executionId];
  const status = st?.status ?? e?.status;
  const percent = st?.progressPercent ?? e?.progressPercent ?? 0;
  const step = st?.currentStep ?? e?.currentStep;
  const logs = running ? live.logs : (e?.logEntries ?? []);

  async function cancel() {
    const r = await api.POST('/api/executions/{executionId}/cancel', { params: { path: { executionId } } });
    const p = problem(r);
    setCancelProblem(p);
    if (!p) toast('Cancel requested');
  }

  return (
    <>
      <h1>Execution</h1>
      <p class="mono">{executionId}</p>
      <ErrorBanner problem={one.problem} />
      {e && (
        <>
          <dl class="facts">
            <div>
              <dt>Operation</dt>
              <dd>{e.toolName}</dd>
            </div>
            <div>
              <dt>Status</dt>
              <dd>{status && <StatusBadge status={status} />}</dd>
            </div>
            <div>
              <dt>Session</dt>
              <dd>
                <Link href={`/sessions/${encodeURIComponent(e.sessionId)}`}>{e.sessionId}</Link>
              </dd>
            </div>
            <div>
              <dt>Started</dt>
              <dd>{formatTime(e.startedAt)}</dd>
            </div>
            <div>
              <dt>Duration</dt>
              <dd>{e.durationMs === null ? '—' : `${(e.durationMs / 1000).toFixed(1)} s`}</dd>
            </div>
            <div>
              <dt>Model</dt>
              <dd>{e.modelId ?? '—'}</dd>
            </div>
          </dl>
          <label for="exec-progress">Progress{step ? `: ${step}` : ''}</label>
          <progress id="exec-progress" max={100} value={percent}>
            {percent}%
          </progress>{' '}
          {percent}%
          {running && (
            <p role="status" class="muted">
              {live.state === 'live' ? 'Following live.' : live.state === 'lost' ? 'The live log was interrupted.' : 'Connecting…'}
            </p>
          )}
          {running && (
            <div class="row">
              <Button variant="danger" onClick={() => void cancel()} disabled={e.cancelRequested}>
                Cancel execution
              </Button>
            </div>
          )}
          <ErrorBanner problem={cancelProblem} />
          {(e.error || live.error) && <ErrorBanner problem={{ status: 0, title: e.error ?? live.error ?? '', details: [], fields: {} }} />}
          {e.resultSummary && <p>{e.resultSummary}</p>}
          <h2>Log</h2>
          {logs.length === 0 ? <p class="muted">No log lines yet.</p> : <LogList entries={logs} label="Execution log" />}
        </>
      )}
    </>
  );
}
