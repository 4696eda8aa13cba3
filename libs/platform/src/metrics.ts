import { subscribe } from 'node:diagnostics_channel';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { buildInfo } from './build-info.js';

/**
 * Prometheus metrics of one process (ARCHITECTURE rule 7), served at /metrics by the ops server of
 * `runStandalone` and by the gateway's ops routes. Every series carries a `service` label
 * (setMetricsService). Helpers below are what service code calls; names are stable (dashboards and
 * alerts use them), see docs/design/ops.md.
 */

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export type BreakerState = 'closed' | 'half_open' | 'open';
const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

function build() {
  const registry = new Registry();
  // The event-loop delay histogram samples every 100 ms, not prom-client's default 10: each sample is a
  // timer wake-up, and at 100 per second they cost an idle process a noticeable share of a core on
  // a VM (docs/BENCHMARKS.md). Each sample still measures the delay to the microsecond.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  const outboxLags = new Map<string, () => Promise<number>>();
  const outboxDeadLetters = new Map<string, () => Promise<number>>();
  const m = {
    registry,
    outboxLags,
    outboxDeadLetters,
    httpRequests: new Counter({
      name: 'imagegen_http_requests_total',
      help: 'HTTP requests served, by route pattern and status code',
      labelNames: ['method', 'route', 'status_code'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'imagegen_http_request_duration_seconds',
      help: 'HTTP request latency (until the response is sent)',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    httpInFlight: new Gauge({
      name: 'imagegen_http_requests_in_flight',
      help: 'HTTP requests being processed',
      registers: [registry],
    }),
    grpcHandled: new Counter({
      name: 'imagegen_grpc_server_handled_total',
      help: 'gRPC calls handled, by method and status code',
      labelNames: ['method', 'code'] as const,
      registers: [registry],
    }),
    grpcDuration: new Histogram({
      name: 'imagegen_grpc_server_handling_seconds',
      help: 'gRPC call latency on the server',
      labelNames: ['method', 'code'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    grpcClientHandled: new Counter({
      name: 'imagegen_grpc_client_handled_total',
      help: 'gRPC calls made to other services, by method and status code (as the caller saw it: DEADLINE_EXCEEDED, UNAVAILABLE, ...)',
      labelNames: ['method', 'code'] as const,
      registers: [registry],
    }),
    grpcClientDuration: new Histogram({
      name: 'imagegen_grpc_client_handling_seconds',
      help: 'gRPC call latency seen by the caller (network and queueing included)',
      labelNames: ['method', 'code'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    eventsPublished: new Counter({
      name: 'imagegen_events_published_total',
      help: 'Events published to the bus by the outbox relay, by outcome (ok, error)',
      labelNames: ['subject', 'outcome'] as const,
      registers: [registry],
    }),
    sessionJsonCache: new Counter({
      name: 'imagegen_session_json_cache_total',
      help: "Session detail reads by whether the session's rendered images were kept (hit) or rendered again (miss)",
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    outboxDeadLettered: new Counter({
      name: 'imagegen_outbox_dead_lettered_total',
      help: 'Outbox events moved to the outbox_dead_letter table instead of being published, by schema and reason (payload_too_large, invalid_subject, no_stream, max_attempts)',
      labelNames: ['schema', 'reason'] as const,
      registers: [registry],
    }),
    eventsConsumed: new Counter({
      name: 'imagegen_events_consumed_total',
      help: 'Event deliveries handled by consumers, by outcome (ok = acked, error = will be redelivered)',
      labelNames: ['durable', 'subject', 'outcome'] as const,
      registers: [registry],
    }),
    eventsRedelivered: new Counter({
      name: 'imagegen_events_redelivered_total',
      help: 'Event deliveries that were redeliveries (delivery count > 1)',
      labelNames: ['durable', 'subject'] as const,
      registers: [registry],
    }),
    eventDuration: new Histogram({
      name: 'imagegen_event_handling_seconds',
      help: 'Time consumers spend on one event delivery',
      labelNames: ['durable', 'subject'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    providerCalls: new Counter({
      name: 'imagegen_provider_calls_total',
      help: 'Upstream provider calls, by provider, model and outcome (success, auth_error, quota_error, rate_limited, timeout, error, circuit_open, ...)',
      labelNames: ['provider', 'model', 'outcome'] as const,
      registers: [registry],
    }),
    providerDuration: new Histogram({
      name: 'imagegen_provider_call_duration_seconds',
      help: 'Upstream provider call latency',
      labelNames: ['provider', 'outcome'] as const,
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 240],
      registers: [registry],
    }),
    breakerState: new Gauge({
      name: 'imagegen_circuit_breaker_state',
      help: 'Circuit breaker state per provider: 0 closed, 1 half_open, 2 open',
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
    breakerTransitions: new Counter({
      name: 'imagegen_circuit_breaker_transitions_total',
      help: 'Circuit breaker state changes per provider and new state',
      labelNames: ['provider', 'state'] as const,
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'imagegen_webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by outcome: succeeded, retrying (failed, will retry), failed (failed, no retry left), disabled (the failure disabled its endpoint)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    ready: new Gauge({
      name: 'imagegen_ready',
      help: '1 when the readiness check passed at the last probe, else 0',
      registers: [registry],
    }),
  };
  // What the process runs, as Prometheus' *_build_info convention: one series, value 1 (a rollout shows two).
  new Gauge({
    name: 'imagegen_build_info',
    help: 'Always 1; its labels name the product version (root package.json) and the git commit this process runs',
    labelNames: ['version', 'commit'] as const,
    registers: [registry],
    collect() {
      this.set(buildInfo(), 1);
    },
  });
  // Read at scrape time from every running relay's schema.
  const perSchemaGauge = (name: string, help: string, sources: Map<string, () => Promise<number>>) =>
    new Gauge({
      name,
      help,
      labelNames: ['schema'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        await Promise.all(
          [...sources].map(async ([schema, read]) => {
            try {
              this.set({ schema }, await withTimeout(read(), 2000));
            } catch {
              // Database unreachable: leave the series out rather than report a wrong number.
            }
          }),
        );
      },
    });
  perSchemaGauge(
    'imagegen_outbox_lag',
    'Outbox rows not yet published to the bus, per schema (grows while the bus is unreachable)',
    outboxLags,
  );
  perSchemaGauge(
    'imagegen_outbox_dead_letters',
    'Rows in the outbox_dead_letter table of each schema: events that will not be published until replayed (alert when > 0)',
    outboxDeadLetters,
  );
  return m;
}

/** `p`, or a rejection after `ms` (the timer does not keep the process alive). */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    t.unref();
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

// One set per process, even if this module is evaluated twice (e.g. through two import paths).
const KEY = Symbol.for('imagegen.metrics');
type Metrics = ReturnType<typeof build>;
const g = globalThis as unknown as Record<symbol, Metrics | undefined>;
const M: Metrics = g[KEY] ?? build();
g[KEY] = M;

/** The process's registry (add your own metrics with `registers: [metricsRegistry]`). */
export const metricsRegistry: Registry = M.registry;

/** Sets the `service` label every series carries (runStandalone does it; the stack uses 'stack'). */
export function setMetricsService(service: string): void {
  M.registry.setDefaultLabels({ service });
}

/** Prometheus text exposition of every metric of this process. */
export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: M.registry.contentType, body: await M.registry.metrics() };
}

/**
 * The label children of hot metrics by a key of their label values: prom-client hashes (sorts and joins) a
 * label object on every inc/observe otherwise, ~40 times per generated image. Keys are bounded (methods, codes,
 * route templates, subjects), and the metrics of M are never reset.
 */
function labelChildren<L, T>(make: (labels: L) => T): (key: string, labels: () => L) => T {
  const children = new Map<string, T>();
  return (key, labels) => {
    let c = children.get(key);
    if (c === undefined) {
      c = make(labels());
      children.set(key, c);
    }
    return c;
  };
}

const httpChildren = labelChildren((l: { method: string; route: string; status_code: string }) => ({
  count: M.httpRequests.labels(l),
  duration: M.httpDuration.labels(l),
}));

export function recordHttpRequest(method: string, route: string, statusCode: number, seconds: number): void {
  const c = httpChildren(`${method}\u0000${route}\u0000${statusCode}`, () => ({ method, route, status_code: String(statusCode) }));
  c.count.inc();
  c.duration.observe(seconds);
}

const grpcCodeName = (code: number) => (GrpcStatus as unknown as Record<number, string>)[code] ?? String(code);

const grpcServerChildren = labelChildren((l: { method: string; code: string }) => ({
  count: M.grpcHandled.labels(l),
  duration: M.grpcDuration.labels(l),
}));
const grpcClientChildren = labelChildren((l: { method: string; code: string }) => ({
  count: M.grpcClientHandled.labels(l),
  duration: M.grpcClientDuration.labels(l),
}));

/** Matches startGrpcServer's `onCall(method, code, ms)` hook; it is the default hook there. */
export function recordGrpcServerCall(method: string, code: number, ms: number): void {
  const c = grpcServerChildren(`${method}\u0000${code}`, () => ({ method, code: grpcCodeName(code) }));
  c.count.inc();
  c.duration.observe(ms / 1000);
}

/**
 * For gRPC clients (createClient's calls, remote or in-process): one call per finished call, `method` the
 * full path (`/imagegen.generation.v1.GenerationService/GenerateImages`), `code` the grpc status number.
 */
export function recordGrpcClientCall(method: string, code: number, ms: number): void {
  const c = grpcClientChildren(`${method}\u0000${code}`, () => ({ method, code: grpcCodeName(code) }));
  c.count.inc();
  c.duration.observe(ms / 1000);
}

export function recordEventPublished(subject: string, ok: boolean): void {
  M.eventsPublished.inc({ subject, outcome: ok ? 'ok' : 'error' });
}

const eventCounts = labelChildren((l: { durable: string; subject: string; outcome: string }) => M.eventsConsumed.labels(l));
const eventDurations = labelChildren((l: { durable: string; subject: string }) => M.eventDuration.labels(l));

export function recordEventConsumed(durable: string, subject: string, outcome: 'ok' | 'error', seconds: number, deliveryCount = 1): void {
  const key = `${durable}\u0000${subject}`;
  eventCounts(`${key}\u0000${outcome}`, () => ({ durable, subject, outcome })).inc();
  eventDurations(key, () => ({ durable, subject })).observe(seconds);
  if (deliveryCount > 1) M.eventsRedelivered.inc({ durable, subject });
}

/**
 * For the generation service's provider adapters: one call per upstream attempt (each key tried counts).
 * `outcome`: 'success' or a failure class such as 'auth_error', 'quota_error', 'rate_limited',
 * 'timeout', 'bad_request', 'server_error', 'network_error', 'circuit_open'.
 */
export function recordProviderCall(provider: string, outcome: string, seconds?: number, model = ''): void {
  M.providerCalls.inc({ provider, model, outcome });
  if (seconds !== undefined) M.providerDuration.observe({ provider, outcome }, seconds);
}

/** For the generation service's circuit breakers: call on creation (closed) and on every state change. */
export function setBreakerState(provider: string, state: BreakerState): void {
  M.breakerState.set({ provider }, BREAKER_VALUE[state]);
  M.breakerTransitions.inc({ provider, state });
}

/** Registers the outbox of `schema` for the imagegen_outbox_lag gauge (startOutboxRelay does it). */
export function trackOutboxLag(schema: string, lag: () => Promise<number>): () => void {
  M.outboxLags.set(schema, lag);
  return () => {
    if (M.outboxLags.get(schema) === lag) M.outboxLags.delete(schema);
  };
}

/** Registers the dead letters of `schema` for the imagegen_outbox_dead_letters gauge (startOutboxRelay does it). */
export function trackOutboxDeadLetters(schema: string, count: () => Promise<number>): () => void {
  M.outboxDeadLetters.set(schema, count);
  return () => {
    if (M.outboxDeadLetters.get(schema) === count) M.outboxDeadLetters.delete(schema);
  };
}

/** The outbox relay moved an event of `schema` to its dead-letter table. */
export function recordOutboxDeadLettered(schema: string, reason: string): void {
  M.outboxDeadLettered.inc({ schema, reason });
}

/** A session detail read found its images' JSON kept at the session's version (hit) or not (miss). */
export function recordSessionJsonCache(outcome: 'hit' | 'miss'): void {
  M.sessionJsonCache.inc({ outcome });
}

export type WebhookAttemptOutcome = 'succeeded' | 'retrying' | 'failed' | 'disabled';

export function recordWebhookAttempt(outcome: WebhookAttemptOutcome): void {
  M.webhookAttempts.inc({ outcome });
}

export function setReadyGauge(ready: boolean): void {
  M.ready.set(ready ? 1 : 0);
}

const FASTIFY_KEY = Symbol.for('imagegen.metrics.fastify');
const START = Symbol('imagegen.metrics.start');

/**
 * Request rate and latency for every fastify app created in this process from now on (gateway,
 * oauth, mcp, sandbox): listens to fastify's `fastify.initialization` diagnostics channel and adds
 * root-level onRequest/onResponse hooks, so route modules need nothing. Idempotent.
 */
export function enableFastifyMetrics(): void {
  const flags = globalThis as unknown as Record<symbol, boolean | undefined>;
  if (flags[FASTIFY_KEY]) return;
  flags[FASTIFY_KEY] = true;
  subscribe('fastify.initialization', (message) => {
    const app = (message as { fastify?: any }).fastify;
    if (!app?.addHook) return;
    app.addHook('onRequest', (req: any, _reply: unknown, done: () => void) => {
      req[START] = process.hrtime.bigint();
      M.httpInFlight.inc();
      done();
    });
    app.addHook('onResponse', (req: any, reply: any, done: () => void) => {
      const started = req[START] as bigint | undefined;
      if (started !== undefined) {
        M.httpInFlight.dec();
        const route = req.routeOptions?.url ?? 'unmatched';
        recordHttpRequest(req.method, route, reply.statusCode, Number(process.hrtime.bigint() - started) / 1e9);
      }
      done();
    });
  });
}

enableFastifyMetrics();
