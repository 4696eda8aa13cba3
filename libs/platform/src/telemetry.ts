import { randomUUID } from 'node:crypto';
import { createRequire, register } from 'node:module';
import { basename, dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Attributes, type Context, context, type Span, type SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { InMemorySpanExporter, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { buildInfo } from './build-info.js';
import type { Config } from './config.js';
import { outgoingContextInjected, rememberServerSpan } from './trace-context.js';

export { SpanKind, SpanStatusCode } from '@opentelemetry/api';
export type { InMemorySpanExporter, ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
export { traceResponse, withoutPropagatedHeaders } from './trace-context.js';

/*
 * OpenTelemetry for every service (ARCHITECTURE rule 7). Inactive unless OTEL_EXPORTER_OTLP_ENDPOINT is
 * set (or a test passes a span exporter); loaded lazily so a process without tracing pays nothing.
 *
 * Auto-instrumentation (http, grpc-js, undici/fetch, fastify) patches modules as they load, so the SDK
 * must start before the service's modules are imported. Standalone processes do that with the preload:
 *   node --import tsx --import ./libs/platform/src/telemetry-preload.ts services/<name>/src/main.ts
 * (deploy/Dockerfile does; k8s and docker-compose use the image). The preload registers the
 * import-in-the-middle loader (ESM modules) and starts the SDK; runStandalone's startTelemetry then
 * finds it running and reuses it. Without the preload, startTelemetry still starts the SDK: http server
 * spans, fetch/undici and fastify work (diagnostics channels and shared prototypes), gRPC spans only
 * for modules loaded afterwards.
 *
 * NOTE: this file is imported by the preload, so it must not import anything instrumented
 * (grpc-js, pino, postgres, ...) at top level.
 */

export interface Telemetry {
  /** True when spans are recorded and exported. */
  readonly active: boolean;
  /** Exports what is buffered. */
  flush(): Promise<void>;
  /** Flushes and shuts the SDK down (the last holder does; earlier calls only flush). */
  stop(): Promise<void>;
}

export interface TelemetryOptions {
  /** Test only: export spans here (e.g. InMemorySpanExporter), each as it ends, besides OTLP if configured. */
  spanExporter?: SpanExporter;
  /** Default true: http, grpc, undici and fastify auto-instrumentation. */
  instrumentations?: boolean;
}

interface Started {
  serviceName: string;
  holders: number;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const KEY = Symbol.for('imagegen.telemetry');
const state = globalThis as unknown as Record<symbol, Started | undefined>;

/** Paths that probes and scrapers hit every few seconds: never traced. */
export const UNTRACED_PATHS = ['/metrics', '/livez', '/readyz', '/health', '/healthz'];
const untraced = (url?: string) => UNTRACED_PATHS.includes((url ?? '').split('?')[0]);

const NOOP: Telemetry = { active: false, flush: async () => {}, stop: async () => {} };

/**
 * Starts tracing for `serviceName` when `config.otelEndpoint` is set (OTLP/HTTP JSON to
 * `${endpoint}/v1/traces`) or `opts.spanExporter` is given; otherwise a no-op. One SDK per process:
 * a second call (e.g. runStandalone after the preload) returns a handle to the running one.
 */
export async function startTelemetry(
  config: Pick<Config, 'otelEndpoint'>,
  serviceName: string,
  opts: TelemetryOptions = {},
): Promise<Telemetry> {
  const running = state[KEY];
  if (running) return handle(running);
  if (!config.otelEndpoint && !opts.spanExporter) return NOOP;
  if (process.env.OTEL_SDK_DISABLED === 'true') return NOOP;

  const [{ NodeSDK }, { BatchSpanProcessor, SimpleSpanProcessor }, { defaultResource, resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/resources'),
  ]);
  const spanProcessors = [];
  if (config.otelEndpoint) {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    const exporter = new OTLPTraceExporter({ url: otlpTracesUrl(config.otelEndpoint) });
    spanProcessors.push(new BatchSpanProcessor(exporter, batchSpanProcessorConfig()));
  }
  if (opts.spanExporter) spanProcessors.push(new SimpleSpanProcessor(opts.spanExporter));

  const sdk = new NodeSDK({
    // defaultResource: telemetry.sdk.*; the env/process/host detectors (OTEL_RESOURCE_ATTRIBUTES wins) are merged by the SDK.
    resource: defaultResource().merge(resourceFromAttributes(resourceAttributes(serviceName))),
    spanProcessors,
    // Logs go to stdout through pino (with trace ids); metrics are scraped from /metrics.
    logRecordProcessors: [],
    instrumentations: opts.instrumentations === false ? [] : await instrumentations(),
  });
  sdk.start();
  outgoingContextInjected(opts.instrumentations !== false);
  const started: Started = {
    serviceName,
    holders: 0,
    flush: async () => {
      const provider = trace.getTracerProvider() as unknown as { getDelegate?: () => unknown };
      const p = (provider.getDelegate?.() ?? provider) as { forceFlush?: () => Promise<void> };
      await p.forceFlush?.();
    },
    shutdown: () => {
      outgoingContextInjected(false);
      return sdk.shutdown();
    },
  };
  state[KEY] = started;
  return handle(started);
}

/**
 * Resource attributes of this process's spans: service.name (OTEL_SERVICE_NAME, else `serviceName`),
 * service.namespace `imagegen`, service.version (SERVICE_VERSION, else the product's version: buildInfo()) and
 * service.instance.id (a random id per process, so two replicas' spans are told apart). OTEL_RESOURCE_ATTRIBUTES
 * (e.g. `deployment.environment.name=prod`) is merged on top by the SDK.
 */
export function resourceAttributes(serviceName: string, env: NodeJS.ProcessEnv = process.env): Attributes {
  return {
    'service.name': env.OTEL_SERVICE_NAME || serviceName,
    'service.namespace': 'imagegen',
    'service.version': env.SERVICE_VERSION || buildInfo().version,
    'service.instance.id': instanceId,
  };
}

const instanceId = randomUUID();

/**
 * Where spans go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is (the standard per-signal override, a full URL),
 * else `${endpoint}/v1/traces`.
 */
export function otlpTracesUrl(endpoint: string, env: NodeJS.ProcessEnv = process.env): string {
  const perSignal = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  return perSignal || `${endpoint.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Batch span processor settings: the standard OTEL_BSP_* variables, with imagegen's defaults where unset
 * (2 s delay instead of 5 s, a 4096-span queue instead of 2048). Invalid numbers fall back to the default.
 */
export function batchSpanProcessorConfig(env: NodeJS.ProcessEnv = process.env) {
  const num = (name: string, dflt?: number) => {
    const v = Number(env[name]);
    return env[name]?.trim() && Number.isFinite(v) && v > 0 ? v : dflt;
  };
  const cfg: { scheduledDelayMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number; exportTimeoutMillis?: number } = {
    scheduledDelayMillis: num('OTEL_BSP_SCHEDULE_DELAY', 2000),
    maxQueueSize: num('OTEL_BSP_MAX_QUEUE_SIZE', 4096),
  };
  const batch = num('OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  if (batch !== undefined) cfg.maxExportBatchSize = Math.min(batch, cfg.maxQueueSize ?? batch);
  const timeout = num('OTEL_BSP_EXPORT_TIMEOUT');
  if (timeout !== undefined) cfg.exportTimeoutMillis = timeout;
  return cfg;
}

/** True when the SDK runs in this process (started by the preload or by startTelemetry). */
export function telemetryRunning(): boolean {
  return state[KEY] !== undefined;
}

function handle(s: Started): Telemetry {
  s.holders++;
  let stopped = false;
  return {
    active: true,
    flush: () => s.flush(),
    async stop() {
      if (stopped) return;
      stopped = true;
      s.holders--;
      if (s.holders > 0) return s.flush();
      state[KEY] = undefined;
      await s.shutdown();
    },
  };
}

/**
 * OTEL_SEMCONV_STABILITY_OPT_IN with `http` added (issue 41): the http and grpc instrumentations then name
 * their attributes by the stable HTTP conventions (http.request.method, http.response.status_code, url.path,
 * url.query, server.address, client.address...) instead of the deprecated ones (http.method, http.status_code,
 * http.target, http.url, net.host.*, net.peer.*), as the undici and fastify instrumentations already do. An
 * operator's `http/dup` (both sets, while migrating a dashboard) is kept.
 */
export function semconvStabilityOptIn(value: string | undefined): string {
  const tokens = (value ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return tokens.includes('http') || tokens.includes('http/dup') ? tokens.join(',') : [...tokens, 'http'].join(',');
}

async function instrumentations() {
  // Read by the instrumentations' constructors, so set before they are made.
  process.env.OTEL_SEMCONV_STABILITY_OPT_IN = semconvStabilityOptIn(process.env.OTEL_SEMCONV_STABILITY_OPT_IN);
  const [{ HttpInstrumentation }, { GrpcInstrumentation }, { UndiciInstrumentation }, { FastifyOtelInstrumentation }] = await Promise.all([
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-grpc'),
    import('@opentelemetry/instrumentation-undici'),
    import('@fastify/otel'),
  ]);
  return [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => untraced(req.url),
      // The server span of each incoming request, for its traceresponse (an outgoing ClientRequest has getHeader).
      requestHook: (span, req) => {
        if (!('getHeader' in req)) rememberServerSpan(req, span);
      },
    }),
    // Readiness probes (imagegen.health.v1.Probe/Ready, every few seconds) are not traced, like the HTTP ones.
    new GrpcInstrumentation({ ignoreGrpcMethods: ['Ready'] }),
    new UndiciInstrumentation(),
    new FastifyOtelInstrumentation({
      registerOnInitialization: true,
      ignorePaths: (route: { url: string }) => untraced(route.url),
    }),
  ];
}

/**
 * The preload's work (see the note at the top): registers the import-in-the-middle ESM loader for the
 * modules the instrumentations patch, then starts the SDK. Service name: OTEL_SERVICE_NAME, else the
 * folder of the entry script (`services/<name>/src/main.ts` -> `imagegen-<name>`), else TARGET.
 */
export async function preloadTelemetry(env: NodeJS.ProcessEnv = process.env): Promise<Telemetry> {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true') return NOOP;
  const req = createRequire(createRequire(import.meta.url).resolve('@opentelemetry/sdk-node'));
  const instrumentationDir = dirname(req.resolve('@opentelemetry/instrumentation/package.json'));
  const iitmReq = createRequire(`${instrumentationDir}/package.json`);
  const hookUrl = pathToFileURL(iitmReq.resolve('import-in-the-middle/hook.mjs'));
  const iitm = (await import(pathToFileURL(iitmReq.resolve('import-in-the-middle')).href)) as {
    createAddHookMessageChannel(): {
      registerOptions: { data?: unknown; transferList?: unknown[] };
      waitForAllMessagesAcknowledged(): Promise<void>;
    };
  };
  // Only the modules the instrumentations hook are wrapped (not every import).
  const { registerOptions, waitForAllMessagesAcknowledged } = iitm.createAddHookMessageChannel();
  register(hookUrl, { parentURL: import.meta.url, ...registerOptions } as Parameters<typeof register>[1]);
  const telemetry = await startTelemetry({ otelEndpoint: endpoint }, serviceNameFromEntry(env));
  await waitForAllMessagesAcknowledged();
  return telemetry;
}

export function serviceNameFromEntry(env: NodeJS.ProcessEnv = process.env, entry = process.argv[1] ?? ''): string {
  if (env.OTEL_SERVICE_NAME) return env.OTEL_SERVICE_NAME;
  const m = /services[\\/]([^\\/]+)[\\/]/.exec(entry);
  if (m) return `imagegen-${m[1]}`;
  return `imagegen-${env.TARGET || basename(entry).replace(/\.[cm]?[jt]s$/, '') || 'service'}`;
}

/** Tests: an exporter keeping finished spans in memory, for startTelemetry's `spanExporter` option. */
export async function createInMemorySpanExporter(): Promise<InMemorySpanExporter> {
  const { InMemorySpanExporter } = await import('@opentelemetry/sdk-trace-base');
  return new InMemorySpanExporter();
}

/** Trace and span id of the span active in this async context (undefined when none). */
export function activeSpanContext(): { traceId: string; spanId: string } | undefined {
  const sc = trace.getSpan(context.active())?.spanContext();
  return sc ? { traceId: sc.traceId, spanId: sc.spanId } : undefined;
}

/** The tracer for manual spans (outbox relay, consumers, postgres queries, provider calls...). */
export function tracer(): Tracer {
  return trace.getTracer('imagegen');
}

/**
 * Runs `fn` in a new active span (child of `parent`, default the active context); records an
 * exception and error status when it throws. No-op cost when tracing is off (non-recording spans).
 */
export async function withSpan<T>(
  name: string,
  opts: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return tracer().startActiveSpan(name, { kind: opts.kind, attributes: opts.attributes }, opts.parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * withSpan inside a traced operation only: without tracing, or without an active span (background work),
 * `fn` runs as is with no span, so such work makes no root spans of its own.
 */
export function withSpanInTrace<T>(
  name: string,
  opts: { kind?: SpanKind; attributes?: Attributes },
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  return telemetryRunning() && trace.getSpan(context.active()) ? withSpan(name, opts, fn) : fn(undefined);
}

// ---- postgres.js: no official instrumentation; manual client spans on awaited queries ----

const SQL_TRACED = Symbol.for('imagegen.sql.traced');

/**
 * Wraps a postgres.js `sql` (and the `tx` of its transactions) so every awaited query gets a CLIENT
 * span `pg <VERB>` with db.system, db.namespace (schema) and db.query.text (the parameterised text,
 * never values). Fragments that are only interpolated into other queries are not awaited and get
 * no span. Use: `traceSql(createDb(url, { schema }), schema)` (cheap when tracing is off).
 */
export function traceSql<S extends object>(sql: S, schema: string): S {
  if ((sql as Record<symbol, unknown>)[SQL_TRACED]) return sql;
  const wrapQuery = (q: unknown, strings: unknown) => {
    if (!q || typeof (q as { then?: unknown }).then !== 'function') return q;
    const text = Array.isArray(strings) ? (strings as string[]).join('$?') : typeof strings === 'string' ? strings : '';
    const verb = /^\s*([a-z]+)/i.exec(text)?.[1]?.toUpperCase() ?? 'QUERY';
    const original = (q as Promise<unknown>).then;
    let traced: Promise<unknown> | undefined;
    Object.defineProperty(q, 'then', {
      configurable: true,
      value(onFulfilled?: (v: unknown) => unknown, onRejected?: (e: unknown) => unknown) {
        if (!trace.getSpan(context.active())) return original.call(q, onFulfilled, onRejected);
        traced ??= withSpan(
          `pg ${verb}`,
          {
            kind: 2 /* CLIENT */,
            attributes: { 'db.system': 'postgresql', 'db.namespace': schema, 'db.query.text': text.slice(0, 2000) },
          },
          () => new Promise((res, rej) => original.call(q, res, rej)),
        );
        return traced.then(onFulfilled, onRejected);
      },
    });
    return q;
  };
  const wrap = <T extends object>(target: T): T =>
    new Proxy(target, {
      apply(fn, thisArg, args) {
        const q = Reflect.apply(fn as (...a: unknown[]) => unknown, thisArg, args);
        // Tagged template: args[0] is the strings array (with .raw); helpers like sql(obj) are fragments.
        return Array.isArray(args[0]) && 'raw' in (args[0] as object) ? wrapQuery(q, args[0]) : q;
      },
      get(obj, prop, receiver) {
        if (prop === SQL_TRACED) return true;
        const v = Reflect.get(obj, prop, receiver);
        if (prop === 'unsafe' && typeof v === 'function') {
          return (text: string, ...rest: unknown[]) => wrapQuery((v as Function).call(obj, text, ...rest), text);
        }
        if ((prop === 'begin' || prop === 'savepoint') && typeof v === 'function') {
          return (...args: unknown[]) => {
            const fnIndex = args.findIndex((a) => typeof a === 'function');
            if (fnIndex < 0) return (v as Function).apply(obj, args);
            const body = args[fnIndex] as (tx: object) => unknown;
            const wrapped = [...args];
            wrapped[fnIndex] = (tx: object) => body(wrap(tx));
            const parent = trace.getSpan(context.active());
            if (!parent || prop === 'savepoint') return (v as Function).apply(obj, wrapped);
            return withSpan('pg transaction', { kind: 2, attributes: { 'db.system': 'postgresql', 'db.namespace': schema } }, () =>
              (v as Function).apply(obj, wrapped),
            );
          };
        }
        return typeof v === 'function' && prop !== 'constructor' ? v.bind(obj) : v;
      },
    });
  return wrap(sql);
}
