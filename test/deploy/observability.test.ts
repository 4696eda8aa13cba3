import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { REPO_ROOT } from '../distributed/harness.js';
import { startTestStack, type TestStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * deploy/grafana/imagegen.json and deploy/prometheus/alerts.yml reference only what exists: every query
 * parses as PromQL, every metric it names is in /metrics of a running stack (after a generation, so the
 * histograms have samples), and every label it matches or groups by is one those series carry.
 */

const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, 'deploy/grafana/imagegen.json'), 'utf8'));
const rules = YAML.parse(readFileSync(join(REPO_ROOT, 'deploy/prometheus/alerts.yml'), 'utf8'));
/** Labels Prometheus adds when it scrapes (kubernetes_sd relabelling, static configs). */
const TARGET_LABELS = new Set(['instance', 'job', 'namespace', 'pod', 'container']);

type Query = { where: string; expr: string };

function dashboardQueries(): Query[] {
  const out: Query[] = [];
  const walk = (panels: any[]) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}"`, expr: t.expr });
      if (p.panels) walk(p.panels);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) if (v.type === 'query') out.push({ where: `variable ${v.name}`, expr: 'up' });
  // Grafana's own variables, as Grafana substitutes them.
  return out.map((q) => ({ ...q, expr: q.expr.replaceAll('$__rate_interval', '5m').replaceAll('$service', '.*') }));
}

function ruleQueries(): { queries: Query[]; records: Set<string> } {
  const queries: Query[] = [];
  const records = new Set<string>();
  for (const g of rules.groups) {
    for (const r of g.rules) {
      if (r.record) records.add(r.record);
      queries.push({ where: `${g.name}/${r.alert ?? r.record}`, expr: r.expr });
    }
  }
  return { queries, records };
}

type Ref = { metric: string; labels: { name: string; op: string; value: string }[] };
type Parsed = { selectors: Ref[]; groupings: { labels: string[]; metrics: string[] }[]; errors: string[] };

/** Metric selectors, their label matchers and the grouping labels of each aggregation, from the PromQL tree. */
function parse(expr: string): Parsed {
  const tree = parser.parse(expr);
  const out: Parsed = { selectors: [], groupings: [], errors: [] };
  const text = (n: { from: number; to: number }) => expr.slice(n.from, n.to);
  tree.iterate({
    enter: (n) => {
      if (n.type.isError) out.errors.push(`syntax error at ${n.from}: ...${expr.slice(Math.max(0, n.from - 20), n.from + 20)}...`);
      if (n.name === 'VectorSelector') {
        const node = n.node;
        const id = node.getChild('Identifier');
        const ref: Ref = { metric: id ? text(id) : '', labels: [] };
        const matchers = node.getChild('LabelMatchers');
        for (const m of matchers ? matchers.getChildren('UnquotedLabelMatcher') : []) {
          const name = m.getChild('LabelName');
          const op = m.getChild('MatchOp');
          const value = m.getChild('StringLiteral');
          if (name) ref.labels.push({ name: text(name), op: op ? text(op) : '=', value: value ? JSON.parse(text(value)) : '' });
        }
        out.selectors.push(ref);
      }
      if (n.name === 'AggregateExpr') {
        const node = n.node;
        const mod = node.getChild('AggregateModifier');
        const grouping = mod?.getChild('GroupingLabels');
        if (!grouping || !mod?.getChild('By')) return;
        const labels = grouping.getChildren('LabelName').map(text);
        const metrics: string[] = [];
        const c = node.cursor();
        c.iterate((s) => {
          if (s.name === 'Identifier' && s.node.parent?.name === 'VectorSelector') metrics.push(text(s));
        });
        out.groupings.push({ labels, metrics });
      }
    },
  });
  return out;
}

/** Families (from # TYPE), and per sample name the label names and values seen. */
function exposition(text: string) {
  const families = new Map<string, string>();
  const samples = new Map<string, Map<string, Set<string>>>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)/.exec(line);
    if (t) families.set(t[1], t[2]);
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!m) continue;
    const labels = samples.get(m[1]) ?? new Map<string, Set<string>>();
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      if (!labels.has(l[1])) labels.set(l[1], new Set());
      labels.get(l[1])?.add(l[2]);
    }
    samples.set(m[1], labels);
  }
  return { families, samples };
}

/**
 * Label names each metric is declared with in libs/platform/src/metrics.ts, for families that have no
 * sample yet (a labelled counter appears only once incremented, e.g. dead letters or redeliveries).
 */
function declaredLabels(): Map<string, string[]> {
  const src = readFileSync(join(REPO_ROOT, 'libs/platform/src/metrics.ts'), 'utf8');
  const out = new Map<string, string[]>();
  for (const block of src.split(/new (?:Counter|Gauge|Histogram)\(\{/).slice(1)) {
    const name = /name: '([\w:]+)'/.exec(block)?.[1];
    const body = block.slice(0, block.indexOf('registers:'));
    const labels = /labelNames: \[([^\]]*)\]/.exec(body)?.[1];
    if (name) out.set(name, [...(labels ?? '').matchAll(/'(\w+)'/g)].map((m) => m[1]).concat('service'));
  }
  return out;
}

const familyOf = (metric: string, families: Map<string, string>): string | undefined => {
  if (families.has(metric)) return metric;
  const base = metric.replace(/_(bucket|sum|count)$/, '');
  return families.get(base) === 'histogram' || families.get(base) === 'summary' ? base : undefined;
};

describe('Grafana dashboard and Prometheus rules', () => {
  const dash = dashboardQueries();
  const { queries: ruleQs, records } = ruleQueries();

  it('every query parses as PromQL; panels and rules are complete', () => {
    for (const q of [...dash, ...ruleQs]) expect(parse(q.expr).errors, `${q.where}: ${q.expr}`).toEqual([]);
    const ids = new Set<number>();
    const walk = (panels: any[]) => {
      for (const p of panels) {
        expect(ids.has(p.id), `panel id ${p.id} unique`).toBe(false);
        ids.add(p.id);
        expect(p.gridPos, p.title).toBeDefined();
        if (p.type !== 'row') expect(p.targets?.length, `${p.title}: queries`).toBeGreaterThan(0);
      }
    };
    walk(dashboard.panels);
    for (const g of rules.groups) {
      for (const r of g.rules) {
        expect(Boolean(r.alert) !== Boolean(r.record), `${g.name}: alert or record`).toBe(true);
        if (r.for) expect(r.for, `${r.alert}: for`).toMatch(/^\d+[smhd]$/);
        if (r.alert) {
          expect(['page', 'ticket', 'info'], `${r.alert}: severity`).toContain(r.labels?.severity);
          expect(r.annotations?.summary, `${r.alert}: summary`).toBeTruthy();
        }
      }
    }
    // Recording rules used anywhere are defined here.
    for (const q of [...dash, ...ruleQs])
      for (const s of parse(q.expr).selectors)
        if (s.metric.includes(':')) expect(records.has(s.metric), `${q.where}: ${s.metric}`).toBe(true);
  });

  it('no query names a deprecated OpenTelemetry HTTP attribute or metric (spans use the stable conventions, issue 41)', () => {
    // Prometheus spellings of the pre-stable names: http.method -> http_method, http.server.duration -> http_server_duration...
    const deprecated =
      /\b(http_(method|status_code|target|url|scheme|flavor|host|user_agent)|net_(host|peer|sock)_\w+|http_(server|client)_duration\w*)\b/;
    for (const q of [...dash, ...ruleQs]) expect(q.expr, `${q.where}: ${q.expr}`).not.toMatch(deprecated);
    expect(JSON.stringify(dashboard)).not.toMatch(deprecated);
    expect('sum by (http_status_code) (rate(http_server_duration_count[5m]))', 'the check can fail').toMatch(deprecated);
  });

  it('the dashboard covers what the issue asks for, with multiwindow multi-burn-rate SLO alerts', () => {
    const used = new Set(dash.flatMap((q) => parse(q.expr).selectors.map((s) => s.metric)));
    for (const m of [
      'imagegen_http_requests_total', // request rate and errors per route
      'imagegen_http_request_duration_seconds_bucket', // latency per route
      'imagegen_grpc_server_handled_total', // per gRPC method
      'imagegen_grpc_server_handling_seconds_bucket',
      'imagegen_provider_calls_total', // generation by provider and outcome
      'imagegen_circuit_breaker_state',
      'imagegen_outbox_lag',
      'imagegen_events_consumed_total', // consumer progress and failures
      'imagegen_events_published_total', // quota crossings (usage.quota_crossed events)
    ])
      expect(used.has(m), m).toBe(true);
    const alerts = rules.groups.flatMap((g: any) => g.rules).filter((r: any) => r.alert);
    for (const slo of ['api_error', 'generation_slow']) {
      const burn = alerts.filter((a: any) => a.labels?.slo === slo);
      expect(burn.map((a: any) => a.labels.severity).sort(), slo).toEqual(['page', 'ticket']);
      const windows = new Set(burn.flatMap((a: any) => [...a.expr.matchAll(/ratio_rate(\w+)/g)].map((m) => m[1])));
      expect([...windows].sort(), `${slo}: long and short windows`).toEqual(['1d', '1h', '2h', '30m', '3d', '5m', '6h'].sort());
      for (const w of windows) expect(records.has(`imagegen:${slo}:ratio_rate${w}`)).toBe(true);
    }
  });

  describe('against /metrics of a running stack', () => {
    let stack: TestStack;
    let metrics: ReturnType<typeof exposition>;

    beforeAll(async () => {
      stack = await startTestStack({ nats: true });
      const t = await stack.createTenant();
      const res = await fetch(`${stack.baseUrl}/api/images`, {
        method: 'POST',
        headers: { 'X-API-Key': t.testKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'a lighthouse at dusk', n: 1 }),
      });
      expect(res.status).toBe(200);
      // One webhook delivery attempt (to a receiver that is not there: counted as 'retrying').
      const hook = await fetch(`${stack.baseUrl}/api/webhooks`, {
        method: 'POST',
        headers: { 'X-API-Key': t.testKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ url: 'https://127.0.0.1:9/hook' }),
      });
      expect(hook.status).toBe(201);
      const { data } = (await hook.json()) as { data: { id: number } };
      const sent = await fetch(`${stack.baseUrl}/api/webhooks/${data.id}/test`, { method: 'POST', headers: { 'X-API-Key': t.testKey } });
      expect(sent.status).toBeLessThan(300);
      // Let the outbox relays publish, the consumers take the events and the dispatcher try the delivery.
      const text = await waitFor(
        async () => {
          const t = await (await fetch(`${stack.baseUrl}/metrics`)).text();
          return /imagegen_events_consumed_total\{[^}]*outcome="ok"/.test(t) && /imagegen_webhook_delivery_attempts_total\{/.test(t) && t;
        },
        { message: 'an event consumed and a webhook delivery attempted (/metrics)', interval: 250 },
      );
      metrics = exposition(text);
    });
    afterAll(async () => {
      await stack?.stop();
    });

    it('every metric referenced exists, histograms have samples, matched and grouped labels exist on them', () => {
      const problems: string[] = [];
      const declared = declaredLabels();
      const labelsOf = (metric: string): Set<string> | undefined => {
        const fam = familyOf(metric, metrics.families);
        if (!fam) return undefined;
        const names = new Set<string>([...TARGET_LABELS, ...(declared.get(fam) ?? [])]);
        for (const [sample, labels] of metrics.samples) {
          if (sample === metric || familyOf(sample, metrics.families) === fam) for (const l of labels.keys()) names.add(l);
        }
        return names;
      };
      for (const q of [...dash, ...ruleQs]) {
        const p = parse(q.expr);
        for (const s of p.selectors) {
          if (s.metric.includes(':') || s.metric === 'up') continue; // recording rules (checked above), Prometheus' own
          const fam = familyOf(s.metric, metrics.families);
          if (!fam) {
            problems.push(`${q.where}: ${s.metric} is not in /metrics`);
            continue;
          }
          if (metrics.families.get(fam) === 'histogram' && !metrics.samples.has(s.metric))
            problems.push(`${q.where}: histogram ${s.metric} has no samples after a generation`);
          const have = labelsOf(s.metric) as Set<string>;
          const sampled = [...metrics.samples.keys()].some((k) => familyOf(k, metrics.families) === fam);
          for (const l of s.labels) {
            if (sampled && !have.has(l.name)) problems.push(`${q.where}: ${s.metric} has no label ${l.name}`);
            // An exact bucket boundary must be one the histogram has.
            if (l.name === 'le' && l.op === '=' && !metrics.samples.get(s.metric)?.get('le')?.has(l.value))
              problems.push(`${q.where}: ${s.metric} has no bucket le="${l.value}"`);
          }
        }
        for (const g of p.groupings) {
          const available = new Set<string>(TARGET_LABELS);
          for (const m of g.metrics) for (const l of labelsOf(m) ?? []) available.add(l);
          for (const l of g.labels) if (!available.has(l)) problems.push(`${q.where}: by (${l}) but ${g.metrics.join(', ')} carry no ${l}`);
        }
      }
      expect(problems).toEqual([]);
    });

    it('the queries would fail on a metric that does not exist (the check can fail)', () => {
      const p = parse('sum by (route) (rate(imagegen_http_requests_totl{route="/api/images"}[5m]))');
      expect(familyOf(p.selectors[0].metric, metrics.families)).toBeUndefined();
      expect(familyOf('imagegen_http_requests_total', metrics.families)).toBe('imagegen_http_requests_total');
      expect(parse('sum(rate(imagegen_http_requests_total[5m])').errors.length).toBeGreaterThan(0);
    });
  });
});
