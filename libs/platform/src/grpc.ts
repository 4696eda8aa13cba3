import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as contracts from '@imagegen/contracts';
import type { Logger } from 'pino';
import { AppError, dependencyUnavailable, type ErrorBody, knownAppError } from './errors.js';
import { recordGrpcClientCall, recordGrpcServerCall } from './metrics.js';
import { SpanKind, telemetryRunning, withSpan } from './telemetry.js';

/**
 * Who is calling, as established by the gateway (ARCHITECTURE rule 2). Services trust only this
 * metadata, never a raw credential.
 */
export interface Principal {
  requestId: string;
  tenantId?: string;
  keyType?: 'live' | 'test';
  /** OAuth scopes; undefined means an API key (all scopes). */
  scopes?: string[];
  adminUserId?: string;
  adminRole?: 'admin' | 'super_admin';
  /** The application session (X-Session-Id / session_id). */
  sessionId?: string;
  /** Where the call came from: tenant_api, mcp, admin, internal. */
  source?: string;
}

const MD = {
  requestId: 'x-request-id',
  tenantId: 'x-tenant-id',
  keyType: 'x-key-type',
  scopes: 'x-scopes',
  adminUserId: 'x-admin-user-id',
  adminRole: 'x-admin-role',
  sessionId: 'x-session-id-bin',
  source: 'x-source',
} as const;
const ERROR_BODY_KEY = 'x-error-body-bin';
const ERROR_HEADERS_KEY = 'x-error-headers-bin';

export function principalToMetadata(p: Principal): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(MD.requestId, p.requestId);
  if (p.tenantId) md.set(MD.tenantId, p.tenantId);
  if (p.keyType) md.set(MD.keyType, p.keyType);
  if (p.scopes) md.set(MD.scopes, p.scopes.join(' '));
  if (p.adminUserId) md.set(MD.adminUserId, p.adminUserId);
  if (p.adminRole) md.set(MD.adminRole, p.adminRole);
  if (p.sessionId) md.set(MD.sessionId, Buffer.from(p.sessionId, 'utf8'));
  if (p.source) md.set(MD.source, p.source);
  return md;
}

export function principalFromMetadata(md: grpc.Metadata): Principal {
  const s = (k: string) => {
    const v = md.get(k)[0];
    return v === undefined ? undefined : Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
  };
  const scopes = s(MD.scopes);
  return {
    requestId: s(MD.requestId) ?? randomUUID(),
    tenantId: s(MD.tenantId),
    keyType: s(MD.keyType) as Principal['keyType'],
    scopes: scopes === undefined ? undefined : scopes.split(' ').filter(Boolean),
    adminUserId: s(MD.adminUserId),
    adminRole: s(MD.adminRole) as Principal['adminRole'],
    sessionId: s(MD.sessionId),
    source: s(MD.source),
  };
}

/** The single mapping between the spec's HTTP statuses and gRPC status codes, both ways. */
const HTTP_TO_GRPC: Record<number, grpc.status> = {
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  402: grpc.status.FAILED_PRECONDITION,
  403: grpc.status.PERMISSION_DENIED,
  404: grpc.status.NOT_FOUND,
  409: grpc.status.ALREADY_EXISTS,
  413: grpc.status.OUT_OF_RANGE,
  422: grpc.status.INVALID_ARGUMENT,
  429: grpc.status.RESOURCE_EXHAUSTED,
  500: grpc.status.INTERNAL,
  502: grpc.status.UNAVAILABLE,
  503: grpc.status.UNAVAILABLE,
  504: grpc.status.DEADLINE_EXCEEDED,
};
const GRPC_TO_HTTP: Partial<Record<grpc.status, number>> = {
  [grpc.status.INVALID_ARGUMENT]: 400,
  [grpc.status.UNAUTHENTICATED]: 401,
  [grpc.status.FAILED_PRECONDITION]: 402,
  [grpc.status.PERMISSION_DENIED]: 403,
  [grpc.status.NOT_FOUND]: 404,
  [grpc.status.ALREADY_EXISTS]: 409,
  [grpc.status.OUT_OF_RANGE]: 413,
  [grpc.status.RESOURCE_EXHAUSTED]: 429,
  [grpc.status.UNAVAILABLE]: 503,
  [grpc.status.DEADLINE_EXCEEDED]: 504,
};

export function httpStatusToGrpc(status: number): grpc.status {
  return HTTP_TO_GRPC[status] ?? (status >= 500 ? grpc.status.INTERNAL : grpc.status.INVALID_ARGUMENT);
}

/** Turns an error raised by a handler into a gRPC ServiceError carrying the exact HTTP body. */
export function toServiceError(err: unknown, requestId: string, logger?: Logger): Partial<grpc.ServiceError> {
  // A database (or other dependency) that is unreachable is 503 + Retry-After (UNAVAILABLE), not INTERNAL.
  const known = knownAppError(err);
  const app = known ?? new AppError(500, { error: 'Internal server error', requestId });
  if (!known) logger?.error({ err, requestId }, 'unhandled error in gRPC handler');
  else if (!(err instanceof AppError))
    logger?.warn({ err: { message: (err as Error).message, code: (err as { code?: unknown }).code }, requestId }, 'dependency unavailable');
  const metadata = new grpc.Metadata();
  metadata.set(ERROR_BODY_KEY, Buffer.from(JSON.stringify({ status: app.status, body: app.body })));
  if (Object.keys(app.headers).length) metadata.set(ERROR_HEADERS_KEY, Buffer.from(JSON.stringify(app.headers)));
  // The handler ran and answered: its 503 (e.g. the database is down) is not the replica dying, and trying
  // the other replicas would only multiply the wait (gRPC retry pushback: a negative value means none).
  metadata.set('grpc-retry-pushback-ms', '-1');
  return { code: httpStatusToGrpc(app.status), details: app.body.error, metadata };
}

/** Turns a gRPC error received by a client back into the AppError the remote handler raised. */
export function fromServiceError(err: grpc.ServiceError, requestId: string, method?: string): AppError {
  const raw = err.metadata?.get(ERROR_BODY_KEY)[0];
  if (raw) {
    const { status, body } = JSON.parse(Buffer.from(raw as Buffer).toString('utf8')) as {
      status: number;
      body: ErrorBody;
    };
    const h = err.metadata.get(ERROR_HEADERS_KEY)[0];
    return new AppError(status, body, h ? JSON.parse(Buffer.from(h as Buffer).toString('utf8')) : {});
  }
  const status = GRPC_TO_HTTP[err.code] ?? 500;
  const app =
    status === 503
      ? new AppError(503, { error: 'Service temporarily unavailable', requestId }, { 'retry-after': '2' })
      : status === 504
        ? new AppError(504, { error: 'Upstream service timed out', requestId })
        : new AppError(Math.min(status, 500), { error: status >= 500 ? 'Internal server error' : err.details, requestId });
  // No handler's body: grpc-js made this status itself (see answerLost).
  transportStatuses.set(app, { code: err.code, details: err.details ?? '', method });
  return app;
}

/** The gRPC status of errors no handler sent (fromServiceError found no error body): what answerLost reads. */
const transportStatuses = new WeakMap<AppError, { code: grpc.status; details: string; method?: string }>();

/**
 * What grpc-js said when a call failed without a handler's answer (a replica gone, no connection, a deadline):
 * the method, the status code's name and grpc-js's details ('No connection established', 'Connection dropped',
 * ...), for the log line of the request that answered 503 or 504. Undefined for a handler's own error.
 */
export function transportFailure(err: unknown): { method?: string; code: string; details: string } | undefined {
  const t = err instanceof AppError ? transportStatuses.get(err) : undefined;
  return t && { method: t.method, code: grpc.status[t.code] ?? String(t.code), details: t.details };
}

/**
 * True when a failed call's error says that the server went away while the call was in flight (or before it got
 * there), so the handler may have done its work without its answer arriving: a status grpc-js made itself, never a
 * handler's answer (handlers always send their error body, see toServiceError). Precisely:
 * - UNAVAILABLE: the connection dropped (the server process died: 'Connection dropped'), was reset or refused, or a
 *   write failed;
 * - CANCELLED from the server's side: a forced shutdown resets its streams ('Call cancelled'); a cancel of the
 *   caller's own ('Cancelled on client', CallOptions.signal) is not a lost answer;
 * - INTERNAL from a reset stream ('Received RST_STREAM with code ...').
 * DEADLINE_EXCEEDED is not: the server sees the call cancelled and ends its work as failed. Neither is anything else.
 */
export function answerLost(err: unknown): boolean {
  const t = err instanceof AppError ? transportStatuses.get(err) : undefined;
  if (!t) return false;
  if (t.code === grpc.status.UNAVAILABLE) return true;
  if (t.code === grpc.status.CANCELLED) return t.details !== 'Cancelled on client';
  return t.code === grpc.status.INTERNAL && t.details.startsWith('Received RST_STREAM');
}

/**
 * True when a call lost its replica after the replica had begun to answer: grpc-js commits a call to its attempt
 * once response headers arrive, and a unary server sends its status only when the answer's message has been
 * written, so a replica that dies between the two fails the call without grpc-js's retry policy repeating it.
 * A method safe to repeat is then called once more (createClient), on a replica still connected. Not when no
 * replica could be reached at all ('No connection established': grpc-js has already made its attempts).
 */
function droppedMidAnswer(err: unknown): boolean {
  return answerLost(err) && !reachedNoReplica(err);
}

/**
 * True when a failed call never reached a replica: grpc-js found none it could connect to ('No connection
 * established'), so no handler ran and nothing of the call can have happened.
 */
export function reachedNoReplica(err: unknown): boolean {
  const t = err instanceof AppError ? transportStatuses.get(err) : undefined;
  return t?.code === grpc.status.UNAVAILABLE && t.details.includes('No connection established');
}

// ---- replicas: per-call balancing, retries, connection lifetime ----

/**
 * The methods a client repeats on UNAVAILABLE (grpc-js retry policy: at most RETRY_MAX_ATTEMPTS attempts, on
 * another replica when one is ready). UNAVAILABLE means the call reached no handler (no connection, a refused
 * stream), the replica died during the call, or the handler refused because a dependency it needs is down. Only
 * methods that are safe to run twice are listed:
 * - reads (Get*, List*, Resolve*, CheckQuota, readiness);
 * - writes whose repetition changes nothing: AuthenticateApiKey (a read; the use it counts lives in the memory of
 *   the replica that answered, gone with it), TouchSession (find-or-create of a session), CommitExecutionImages
 *   (moves an execution's pending images into the gallery; a second call finds none left), AdminLogout (revokes a
 *   session), AuthenticateAdminSession (a read).
 * Everything else (Create*, Update*, Delete*, StoreImage, GenerateImages, EditImage, UploadForEditing,
 * RecordApiKeyUsage, MarkAssetsUsed, AdminLogin, AcceptInvitation, TestWebhook, ...) is not repeated: a failure
 * whose replica died answers 503 with Retry-After (fromServiceError), and the client decides (with an
 * Idempotency-Key where the API offers one); GenerateImages and EditImage callers first ask another replica whether
 * the execution completed (answerLost, generation-calls.ts). grpc-js also repeats any call transparently when the stream never
 * reached the server (REFUSED_STREAM, a connection closing with GOAWAY): that is safe for every method. A call of
 * these methods whose replica died after its answer's headers (grpc-js no longer repeats it) is called once more by
 * createClient (droppedMidAnswer).
 */
export const RETRYABLE_METHODS: ReadonlySet<string> = new Set(
  Object.entries({
    'imagegen.tenancy.v1.TenancyService': [
      'AuthenticateApiKey',
      'GetTenant',
      'ListTenants',
      'GetTenantDetail',
      'GetProviderCredentials',
      'GetTenantStats',
      'AdminLogout',
      'AuthenticateAdminSession',
      'GetAdminUser',
      'ListAdminUsers',
      'ListInvitations',
      'GetInvitation',
    ],
    'imagegen.library.v1.LibraryService': [
      'CommitExecutionImages',
      'GetImageData',
      'GetObjectData',
      'ListImages',
      'GetImage',
      'ResolveImages',
      'TouchSession',
      'ListSessions',
      'GetSession',
    ],
    'imagegen.library.v1.AssetsService': [
      'ListCharacters',
      'GetCharacter',
      'ListProducts',
      'GetProduct',
      'ListScenes',
      'GetScene',
      'ListStylePresets',
      'GetStylePreset',
      'ListSearchPresets',
      'RunSearchPreset',
      'ResolveGenerationAssets',
    ],
    'imagegen.generation.v1.GenerationService': ['GetExecution', 'ListSessionExecutions', 'ListActiveExecutions', 'GetProviderStatus'],
    'imagegen.usage.v1.UsageService': ['CheckQuota', 'GetQuota', 'GetUsage', 'GetPlatformUsage'],
    'imagegen.webhooks.v1.WebhookService': ['ListWebhooks', 'GetWebhook', 'ListDeliveries'],
    'imagegen.health.v1.Probe': ['Ready'],
  }).flatMap(([service, methods]) => methods.map((m) => `/${service}/${m}`)),
);
/** grpc-js caps maxAttempts at 5: all of them, ~0.5 s of backoff in all (a connection closing for age can take two). */
export const RETRY_MAX_ATTEMPTS = 5;

/**
 * Servers close each connection after this age (GOAWAY, +-10% jitter from grpc-js) so that clients resolve their
 * target again and spread over pods added since (a DNS name of a headless Service only re-resolves on a
 * connection change). Calls in flight keep their connection up to MAX_CONNECTION_AGE_GRACE_MS (above the
 * longest call: provB generations may take 240 s); new calls go to the new connection.
 */
export const MAX_CONNECTION_AGE_MS = 120_000;
export const MAX_CONNECTION_AGE_GRACE_MS = 300_000;
/** Both sides ping an idle connection after 30 s and drop it after 10 s without an answer (a vanished pod or node). */
const KEEPALIVE_TIME_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;

function serverConnectionOptions(maxConnectionAgeMs = MAX_CONNECTION_AGE_MS): grpc.ChannelOptions {
  return {
    'grpc.max_connection_age_ms': maxConnectionAgeMs,
    'grpc.max_connection_age_grace_ms': MAX_CONNECTION_AGE_GRACE_MS,
    'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
    'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
  };
}

/**
 * The service config of a client of `definition`: round_robin over every address of the target (a DNS name
 * with several A records, e.g. a headless Service, or a static list `ipv4:10.0.0.1:50051,10.0.0.2:50051`),
 * i.e. balanced per call, and the retry policy for its RETRYABLE_METHODS.
 */
export function clientServiceConfig(definition: AnyDefinition): string {
  const name = Object.values(definition)
    .filter((m) => RETRYABLE_METHODS.has(m.path))
    .map((m) => {
      const [service, method] = m.path.slice(1).split('/');
      return { service, method };
    });
  return JSON.stringify({
    loadBalancingConfig: [{ round_robin: {} }],
    methodConfig: name.length
      ? [
          {
            name,
            retryPolicy: {
              maxAttempts: RETRY_MAX_ATTEMPTS,
              initialBackoff: '0.05s',
              maxBackoff: '0.5s',
              backoffMultiplier: 3,
              retryableStatusCodes: ['UNAVAILABLE'],
            },
          },
        ]
      : [],
  });
}

function clientChannelOptions(definition: AnyDefinition): grpc.ChannelOptions {
  return {
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    // A restarted peer (deploy, crash) is found again within ~2 s instead of grpc-js's default
    // backoff of up to 120 s, during which every call fails at once with UNAVAILABLE (503).
    'grpc.initial_reconnect_backoff_ms': 250,
    'grpc.max_reconnect_backoff_ms': 2000,
    'grpc.service_config': clientServiceConfig(definition),
    // The service config above is the whole config: no DNS TXT lookups for one.
    'grpc.service_config_disable_resolution': 1,
    'grpc.enable_retries': 1,
    // A name is resolved again (on a connection change) at most every 5 s, not grpc-js's 30 s.
    'grpc.dns_min_time_between_resolutions_ms': 5000,
    'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
    'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
    'grpc.keepalive_permit_without_calls': 1,
  };
}

/**
 * The in-process server a target names, if one runs in this process: `host:port`, `dns:///host:port`, or a
 * static list (`ipv4:a:p,b:p`) one of whose addresses is served here (the local replica then takes every call).
 */
function localServer(target: string): Map<string, UnaryRunner> | undefined {
  const direct = inProcessServers.get(target);
  if (direct || inProcessServers.size === 0) return direct;
  const list = target.replace(/^(dns:\/\/\/|dns:|ipv4:)/, '');
  for (const a of list.split(',')) {
    const m = inProcessServers.get(a.trim());
    if (m) return m;
  }
  return undefined;
}

// ---- typed server and client built from ts-proto grpc-js service definitions ----

type AnyDefinition = Record<string, grpc.MethodDefinition<any, any>>;
type ReqOf<M> = M extends grpc.MethodDefinition<infer Req, any> ? Req : never;
type ResOf<M> = M extends grpc.MethodDefinition<any, infer Res> ? Res : never;

export interface CallContext {
  principal: Principal;
  logger: Logger;
  deadline?: Date;
  /** Aborted when the caller cancels the call or goes away (its process died, its channel closed). */
  signal: AbortSignal;
}

export type Handlers<D extends AnyDefinition> = {
  [K in keyof D]: (req: ReqOf<D[K]>, ctx: CallContext) => Promise<ResOf<D[K]>>;
};

export interface GrpcServiceBinding<D extends AnyDefinition = AnyDefinition> {
  definition: D;
  handlers: Handlers<D>;
}

export function bind<D extends AnyDefinition>(definition: D, handlers: Handlers<D>): GrpcServiceBinding {
  return { definition, handlers } as unknown as GrpcServiceBinding;
}

export interface RunningGrpcServer {
  address: string;
  port: number;
  stop(graceMs?: number): Promise<void>;
}

/** Starts a gRPC server with unary handlers; handler errors become statuses carrying the spec body. */
export async function startGrpcServer(opts: {
  host?: string;
  port?: number;
  services: GrpcServiceBinding[];
  logger: Logger;
  /** Extra per-call hook, e.g. metrics. */
  onCall?: (method: string, code: grpc.status, ms: number) => void;
  /**
   * The service's readiness (e.g. dbReadiness(sql)): served as imagegen.health.v1.Probe/Ready, which answers
   * OK when it holds and UNAVAILABLE (503) otherwise, so callers (the gateway's /readyz) see more than an open port.
   */
  ready?: () => Promise<boolean>;
  /** Connection age after which the server asks its clients to reconnect (GOAWAY); default MAX_CONNECTION_AGE_MS. */
  maxConnectionAgeMs?: number;
}): Promise<RunningGrpcServer> {
  // Every server counts its calls for /metrics (imagegen_grpc_server_*); opts.onCall runs too.
  const onCall = (method: string, code: grpc.status, ms: number) => {
    recordGrpcServerCall(method, code, ms);
    opts.onCall?.(method, code, ms);
  };
  const server = new grpc.Server({
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
    ...serverConnectionOptions(opts.maxConnectionAgeMs),
  });
  const methods = new Map<string, UnaryRunner>();
  const ready = opts.ready;
  const services = ready
    ? [
        ...opts.services,
        bind(READINESS, {
          ready: async () => {
            if (!(await ready())) throw dependencyUnavailable();
            return {};
          },
        }),
      ]
    : opts.services;
  for (const { definition, handlers } of services) {
    const impl: grpc.UntypedServiceImplementation = {};
    for (const [name, method] of Object.entries(definition)) {
      const handler = (handlers as Record<string, (r: unknown, c: CallContext) => Promise<unknown>>)[name];
      if (!handler) throw new Error(`missing gRPC handler ${method.path}`);
      const run: UnaryRunner = async (request, metadata, deadline, signal = new AbortController().signal) => {
        const started = performance.now();
        const principal = principalFromMetadata(metadata);
        // The call's child logger is made on first use only: pino's child() (bindings, redaction) costs
        // more than many handlers that never log.
        let logger: Logger | undefined;
        const call: CallContext = {
          principal,
          deadline,
          signal,
          get logger() {
            logger ??= opts.logger.child({ requestId: principal.requestId, rpc: method.path });
            return logger;
          },
        };
        try {
          const res = await handler(request, call);
          onCall(method.path, grpc.status.OK, performance.now() - started);
          return { res };
        } catch (err) {
          const se = toServiceError(err, principal.requestId, call.logger);
          onCall(method.path, se.code ?? grpc.status.UNKNOWN, performance.now() - started);
          return { err: se };
        }
      };
      methods.set(method.path, run);
      impl[name] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const deadline = call.getDeadline();
        const cancelled = new AbortController();
        call.once('cancelled', () => cancelled.abort(new Error('call cancelled by the caller')));
        void run(call.request, call.metadata, deadline instanceof Date ? deadline : undefined, cancelled.signal).then((r) =>
          'err' in r ? callback(r.err as grpc.ServiceError) : callback(null, r.res),
        );
      };
    }
    server.addService(definition as grpc.ServiceDefinition, impl);
  }
  const host = opts.host ?? '127.0.0.1';
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${opts.port ?? 0}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const address = `${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
  const localNames = [address, `localhost:${port}`];
  for (const a of localNames) inProcessServers.set(a, methods);
  return {
    address,
    port,
    stop: (graceMs = 5000) =>
      new Promise<void>((resolve) => {
        for (const a of localNames) if (inProcessServers.get(a) === methods) inProcessServers.delete(a);
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

// ---- in-process calls ----

/** One unary method of a running server: the handler behind the same principal, logging, metrics and error mapping. */
type UnaryRunner = (
  request: unknown,
  metadata: grpc.Metadata,
  deadline: Date | undefined,
  signal?: AbortSignal,
) => Promise<{ res: unknown } | { err: Partial<grpc.ServiceError> }>;

/** The servers running in this process, by the addresses clients resolve them to. */
const inProcessServers = new Map<string, Map<string, UnaryRunner>>();

interface InProcessCall {
  method: grpc.MethodDefinition<any, any>;
  run: UnaryRunner;
  req: unknown;
  principal: Principal;
  deadline: Date;
  signal?: AbortSignal;
}

/**
 * A call to a server in this same process (the all-in-one stack), without the loopback HTTP/2 hop: on this
 * kind of machine grpc-js and http2 cost ~0.6 ms of main-thread time per unary call, more than most
 * handlers. Everything else is as on the wire: request and response are copied as a socket's decoding would
 * make them (messageCopiers: defaults filled in, unknown fields dropped, no shared objects), the principal
 * through metadata, errors through
 * toServiceError/fromServiceError, the deadline is enforced (504), server metrics count the call, and
 * when tracing runs the call gets the CLIENT and SERVER spans the grpc-js instrumentation would make.
 */
function callInProcess(call: InProcessCall): Promise<unknown> {
  if (!telemetryRunning()) return invokeInProcess(call);
  const path = call.method.path.slice(1);
  const [service, rpc] = path.split('/');
  const attributes = { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': rpc };
  return withSpan(`grpc.${path}`, { kind: SpanKind.CLIENT, attributes }, () =>
    withSpan(`grpc.${path}`, { kind: SpanKind.SERVER, attributes }, () => invokeInProcess(call)),
  );
}

async function invokeInProcess({ method, run, req, principal, deadline, signal }: InProcessCall): Promise<unknown> {
  const copy = messageCopiers().get(method.path);
  let request: unknown;
  try {
    request = copyMessage(req, copy?.request, method.requestSerialize, method.requestDeserialize);
  } catch (e) {
    if (e instanceof CopyMismatch) throw e;
    // As grpc-js reports a request it cannot serialize: INTERNAL, i.e. 500 for the caller.
    const err = { code: grpc.status.INTERNAL, details: 'Request message serialization failure', metadata: new grpc.Metadata() };
    throw fromServiceError(err as grpc.ServiceError, principal.requestId);
  }
  // The handler's signal aborts when the caller's does or the deadline passes, as a socket call's 'cancelled'.
  const cancelled = new AbortController();
  const cancel = () => cancelled.abort(new Error('call cancelled by the caller'));
  signal?.addEventListener('abort', cancel, { once: true });
  if (signal?.aborted) cancel();
  const r = await withDeadline(run(request, principalToMetadata(principal), deadline, cancelled.signal), deadline).finally(() =>
    signal?.removeEventListener('abort', cancel),
  );
  if ('err' in r && !cancelled.signal.aborted) cancel();
  if ('err' in r) throw fromServiceError(r.err as grpc.ServiceError, principal.requestId);
  return copyMessage(r.res, copy?.response, method.responseSerialize, method.responseDeserialize);
}

/** Under vitest every copy is also checked against the wire form (see copyMessage). */
const checkCopies = Boolean(process.env.VITEST);

/**
 * A message as the other side of a call gets it: the contract's copier, else the wire form (roundTrip). Under
 * vitest the copy is also put through the wire form and must equal it: a message a socket call would refuse (a
 * field missing or of the wrong type, which only a cast lets through) fails there as it would over the socket, and a
 * copier that diverged from the serializers fails the test that made the call.
 */
function copyMessage<T>(message: T, copy: ((m: T) => T) | undefined, serialize: (m: T) => Buffer, deserialize: (b: Buffer) => T): T {
  if (!copy) return roundTrip(message, serialize, deserialize);
  const out = copy(message);
  if (checkCopies) {
    const wire = roundTrip(message, serialize, deserialize);
    if (!isDeepStrictEqual(out, wire)) {
      const [a, b] = [out, wire] as Record<string, unknown>[];
      const fields = Object.keys(b).filter((k) => !isDeepStrictEqual(a[k], b[k]));
      throw new CopyMismatch(
        `an in-process copy differs from its wire form in ${fields.map((k) => `${k} (${String(a[k])} -> ${String(b[k])})`).join(', ')}`,
      );
    }
  }
  return out;
}
class CopyMismatch extends Error {}

interface MessageCopier {
  request<T>(message: T): T;
  response<T>(message: T): T;
}
interface GenericMethod {
  name: string;
  requestType: { fromPartial(m: unknown): unknown };
  responseType: { fromPartial(m: unknown): unknown };
}
let copiersByPath: Map<string, MessageCopier> | undefined;

/**
 * Every contract method's request and response copiers by path: ts-proto's fromPartial of its message types (from
 * the generated generic definitions). A copy is what a socket call's decoding makes of a message (each field its
 * value or its default, unknown fields dropped, new objects all the way down) at a fraction of the cost: going
 * through the wire form spends most of its time transcoding strings (14 us for an ImageRecord against 0.05 us;
 * timed in place, a generated image's 8 messages took 0.33-0.38 ms of main thread through the wire form and 60-75 us
 * this way).
 * Byte fields, small ones too, are handed over as they are: neither side changes them after the call. Methods without
 * a contract (the readiness probe, tests' own definitions) go through their serializers (roundTrip).
 */
function messageCopiers(): Map<string, MessageCopier> {
  if (copiersByPath) return copiersByPath;
  copiersByPath = new Map();
  for (const area of Object.values(contracts))
    for (const value of Object.values(area)) {
      if (typeof value !== 'object' || value === null || !('fullName' in value) || !('methods' in value)) continue;
      for (const m of Object.values(value.methods as Record<string, GenericMethod>))
        copiersByPath.set(`/${value.fullName}/${m.name}`, {
          request: <T>(message: T) => m.requestType.fromPartial(message) as T,
          response: <T>(message: T) => m.responseType.fromPartial(message) as T,
        });
    }
  return copiersByPath;
}

/** Byte fields at least this large (image data) pass an in-process call by reference instead of being copied. */
const SHARED_BYTES_MIN = 16 * 1024;

/**
 * A message through its wire form, as a socket call would see it (defaults filled in, unknown values refused),
 * except that large top-level byte fields are handed over as they are: copying an image's bytes on every in-process
 * call is off-heap churn that drives V8's old-generation collections. Neither side changes them after the call.
 */
function roundTrip<T>(message: T, serialize: (m: T) => Buffer, deserialize: (b: Buffer) => T): T {
  const shared = Object.entries(message as Record<string, unknown>).filter(
    ([, v]) => v instanceof Uint8Array && v.byteLength >= SHARED_BYTES_MIN,
  );
  if (shared.length === 0) return deserialize(serialize(message));
  const rest = { ...(message as Record<string, unknown>) };
  for (const [k] of shared) rest[k] = new Uint8Array(0);
  const out = deserialize(serialize(rest as T)) as Record<string, unknown>;
  for (const [k, v] of shared) out[k] = v;
  return out as T;
}

function withDeadline<T>(p: Promise<T>, deadline: Date): Promise<T | { err: Partial<grpc.ServiceError> }> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<{ err: Partial<grpc.ServiceError> }>((resolve) => {
    timer = setTimeout(
      () => resolve({ err: { code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded', metadata: new grpc.Metadata() } }),
      Math.max(0, deadline.getTime() - Date.now()),
    );
  });
  return Promise.race([p, expired]).finally(() => clearTimeout(timer));
}

export type Client<D extends AnyDefinition> = {
  [K in keyof D]: (req: ReqOf<D[K]>, principal: Principal, opts?: CallOptions) => Promise<ResOf<D[K]>>;
} & { close(): void };

/** Per call: its own deadline, and a signal that cancels it (the server's handler sees its CallContext.signal abort). */
export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

let defaultDeadlineMs = 30_000;
let inProcessCalls = true;

/**
 * Process-wide defaults of the clients createClient makes: the deadline of calls without their own
 * timeoutMs (Config.grpcDeadlineMs, GRPC_DEADLINE_MS) and whether calls to a server of this same process
 * skip the loopback socket (Config.grpcInProcess, GRPC_IN_PROCESS). Set by whoever loads the config
 * (runStandalone, the stack) before services start.
 */
export function configureGrpcClients(opts: { deadlineMs: number; inProcess?: boolean }): void {
  defaultDeadlineMs = opts.deadlineMs;
  if (opts.inProcess !== undefined) inProcessCalls = opts.inProcess;
}

/**
 * A promise-returning client for `definition` at `address`: `host:port` (every address the name resolves to),
 * `dns:///host:port`, or a static list `ipv4:127.0.0.1:p1,127.0.0.1:p2`. Calls are balanced per call over the
 * ready addresses (round_robin); RETRYABLE_METHODS are repeated on UNAVAILABLE. Every call carries the principal
 * as metadata and a deadline; a failed call rejects with the AppError the server raised.
 */
export function createClient<D extends AnyDefinition>(definition: D, address: string | (() => string)): Client<D> {
  const Ctor = grpc.makeGenericClientConstructor(definition as grpc.ServiceDefinition, 'svc');
  const options = clientChannelOptions(definition);
  let client: grpc.Client | undefined;
  let boundTo: string | undefined;
  const get = () => {
    const addr = typeof address === 'function' ? address() : address;
    if (!client || boundTo !== addr) {
      client?.close();
      client = new Ctor(addr, grpc.credentials.createInsecure(), options);
      boundTo = addr;
    }
    return client as unknown as Record<string, Function>;
  };
  const out: Record<string, unknown> = {
    close: () => client?.close(),
  };
  for (const [name, method] of Object.entries(definition)) {
    const retryable = RETRYABLE_METHODS.has(method.path);
    out[name] = (req: unknown, principal: Principal, opts?: CallOptions) => {
      const deadline = new Date(Date.now() + (opts?.timeoutMs ?? defaultDeadlineMs));
      const local = inProcessCalls ? localServer(typeof address === 'function' ? address() : address)?.get(method.path) : undefined;
      const started = performance.now();
      const remote = () =>
        new Promise((resolve, reject) => {
          const signal = opts?.signal;
          const cancel = () => c.cancel();
          const c = get()[name](req, principalToMetadata(principal), { deadline }, (err: grpc.ServiceError | null, res: unknown) => {
            signal?.removeEventListener('abort', cancel);
            err ? reject(fromServiceError(err, principal.requestId, method.path)) : resolve(res);
          }) as grpc.ClientUnaryCall;
          signal?.addEventListener('abort', cancel, { once: true });
          if (signal?.aborted) cancel();
        });
      const call: Promise<unknown> = local
        ? callInProcess({ method, run: local, req, principal, deadline, signal: opts?.signal })
        : retryable
          ? remote().catch((err: unknown) => {
              if (!droppedMidAnswer(err) || opts?.signal?.aborted || Date.now() >= deadline.getTime()) throw err;
              return remote();
            })
          : remote();
      // Client-side RED metrics, the same for remote and in-process calls (the code from the status the caller sees).
      return call.then(
        (res) => {
          recordGrpcClientCall(method.path, grpc.status.OK, performance.now() - started);
          return res;
        },
        (err: unknown) => {
          const code = err instanceof AppError ? httpStatusToGrpc(err.status) : grpc.status.UNKNOWN;
          recordGrpcClientCall(method.path, code, performance.now() - started);
          throw err;
        },
      );
    };
  }
  return out as Client<D>;
}

/**
 * imagegen.health.v1.Probe/Ready, the readiness method startGrpcServer serves when given `ready` (empty messages
 * both ways, so it needs no proto). OK: ready; UNAVAILABLE: a dependency the service needs is down.
 */
const empty = () => Buffer.alloc(0);
export const READINESS = {
  ready: {
    path: '/imagegen.health.v1.Probe/Ready',
    requestStream: false,
    responseStream: false,
    requestSerialize: empty,
    requestDeserialize: () => ({}),
    responseSerialize: empty,
    responseDeserialize: () => ({}),
    originalName: 'ready',
  },
} as const satisfies AnyDefinition;

/**
 * A readiness check of the gRPC service at `address` (Probe/Ready within `timeoutMs`): false when it answers
 * UNAVAILABLE or not in time, true when ready, and true as well when it serves no readiness method (the
 * channel works; UNIMPLEMENTED).
 */
export function grpcReadinessCheck(address: string | (() => string), timeoutMs = 1000): () => Promise<boolean> {
  const client = createClient(READINESS, address);
  return async () => {
    try {
      await client.ready({}, internalPrincipal(), { timeoutMs });
      return true;
    } catch (err) {
      // Any other answer (UNIMPLEMENTED comes back as 500) came from a server that is up; an unknown address is not.
      return err instanceof AppError && err.status !== 502 && err.status !== 503 && err.status !== 504;
    }
  };
}

/** A principal for calls a service makes on its own behalf (consumers, background jobs). */
export function internalPrincipal(tenantId?: string): Principal {
  return { requestId: randomUUID(), tenantId, source: 'internal' };
}
