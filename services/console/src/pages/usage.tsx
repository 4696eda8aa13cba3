/**
 * Usage (issue 38 item 7): this month's quota as a gauge (used, remaining, rate limit; GET /api/profile), the months
 * as a bar chart of images and MB (plain SVG, no chart library; GET /api/usage), and the rolling 30 days.
 */
import { api, problem } from '../api';
import { formatBytes, type Usage as UsageData } from '../components/api-types';
import { ErrorBanner, Table, useLoad } from '../components/ui';
import './tenant-pages.css';

export default function Usage() {
  const profile = useLoad(async () => {
    const r = await api.GET('/api/profile');
    return { value: r.data?.tenant, problem: problem(r) };
  }, []);
  const usage = useLoad(async () => {
    const r = await api.GET('/api/usage', { params: { query: { limit: 12 } } });
    return { value: r.data?.data, problem: problem(r) };
  }, []);
  const q = profile.value?.quotas ?? usage.value?.quota;

  return (
    <>
      <h1>Usage</h1>
      <ErrorBanner problem={profile.problem ?? usage.problem} />
      <div class="cards">
        <section class="card" aria-labelledby="quota-title">
          <h2 id="quota-title">This month's quota</h2>
          {q ? <Gauge used={q.monthlyUsedMb} quota={q.monthlyQuotaMb} /> : <p class="muted">Loading…</p>}
          {q && (
            <dl class="facts">
              <div>
                <dt>Used</dt>
                <dd data-testid="quota-used">{q.monthlyUsedMb.toLocaleString()} MB</dd>
              </div>
              <div>
                <dt>Remaining</dt>
                <dd>{q.monthlyRemainingMb.toLocaleString()} MB</dd>
              </div>
              <div>
                <dt>Quota</dt>
                <dd>{q.monthlyQuotaMb.toLocaleString()} MB</dd>
              </div>
              <div>
                <dt>Rate limit</dt>
                <dd>{q.rateLimitPerMinute.toLocaleString()} requests a minute</dd>
              </div>
            </dl>
          )}
        </section>
        <section class="card" aria-labelledby="recent-title">
          <h2 id="recent-title">The last 30 days</h2>
          {usage.value ? (
            <dl class="facts">
              <div>
                <dt>Images</dt>
                <dd data-testid="recent-images">{usage.value.recent.images.toLocaleString()}</dd>
              </div>
              <div>
                <dt>Stored</dt>
                <dd data-testid="recent-bytes">{formatBytes(usage.value.recent.bytes)}</dd>
              </div>
            </dl>
          ) : (
            <p class="muted">Loading…</p>
          )}
        </section>
      </div>
      {usage.value && <Months months={usage.value.months} />}
    </>
  );
}

/** A half-ring gauge of the month's use (SVG arc; red when the quota is reached). */
function Gauge({ used, quota }: { used: number; quota: number }) {
  const share = quota > 0 ? Math.min(1, used / quota) : 1;
  const pct = Math.round(share * 100);
  const r = 80;
  const arc = (to: number) => {
    const a = Math.PI * (1 - to);
    const x = 100 + r * Math.cos(a);
    const y = 100 - r * Math.sin(a);
    return `M 20 100 A ${r} ${r} 0 0 1 ${x.toFixed(2)} ${y.toFixed(2)}`;
  };
  return (
    <svg viewBox="0 0 200 115" width="200" height="115" role="img" aria-label={`${used} of ${quota} MB used this month (${pct}%)`}>
      <path d={arc(1)} class="gauge-track" fill="none" stroke="currentColor" stroke-opacity="0.2" stroke-width="18" />
      {share > 0 && (
        <path d={arc(share)} class={share >= 1 ? 'gauge-fill over' : 'gauge-fill'} fill="none" stroke="currentColor" stroke-width="18" />
      )}
      <text x="100" y="95" text-anchor="middle" font-size="22" fill="currentColor">
        {pct}%
      </text>
    </svg>
  );
}

/** The months, oldest to newest, as paired bars (images, MB), with the same figures in a table for screen readers. */
function Months({ months }: { months: UsageData['months'] }) {
  const rows = [...months].reverse();
  const maxImages = Math.max(1, ...rows.map((m) => m.total_images));
  const maxMb = Math.max(1, ...rows.map((m) => m.total_mb));
  const slot = 56;
  const h = 160;
  const width = Math.max(slot * rows.length + 20, 200);
  return (
    <section aria-labelledby="months-title">
      <h2 id="months-title">By month</h2>
      <ul class="legend" aria-hidden="true">
        <li>
          <span class="swatch swatch-images" />
          Images
        </li>
        <li>
          <span class="swatch swatch-mb" />
          MB stored
        </li>
      </ul>
      {rows.length === 0 ? (
        <p class="muted">No usage yet.</p>
      ) : (
        <svg class="chart" viewBox={`0 0 ${width} ${h + 40}`} width={width} height={h + 40} aria-hidden="true">
          <line x1="10" x2={width - 10} y1={h + 10} y2={h + 10} class="chart-axis" stroke="currentColor" stroke-opacity="0.3" />
          {rows.map((m, i) => {
            const x = 15 + i * slot;
            const hi = (m.total_images / maxImages) * h;
            const hm = (m.total_mb / maxMb) * h;
            return (
              <g key={m.month}>
                <rect class="bar-images" x={x} y={h + 10 - hi} width="20" height={hi}>
                  <title>{`${m.month}: ${m.total_images} images`}</title>
                </rect>
                <rect class="bar-mb" x={x + 22} y={h + 10 - hm} width="20" height={hm}>
                  <title>{`${m.month}: ${m.total_mb} MB`}</title>
                </rect>
                <text x={x + 21} y={h + 28} text-anchor="middle">
                  {m.month}
                </text>
              </g>
            );
          })}
        </svg>
      )}
      <Table
        caption="Usage by month, newest first"
        rows={months}
        rowKey={(m) => m.month}
        columns={[
          { label: 'Month', cell: (m) => m.month },
          { label: 'Images', cell: (m) => m.total_images.toLocaleString() },
          { label: 'Operations', cell: (m) => m.total_operations.toLocaleString() },
          { label: 'MB stored', cell: (m) => m.total_mb.toLocaleString() },
          { label: 'Average duration', cell: (m) => `${(m.avg_duration_ms / 1000).toFixed(1)} s` },
        ]}
      />
    </section>
  );
}
