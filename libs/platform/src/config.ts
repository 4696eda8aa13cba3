import { z } from 'zod';
import { parseDuration } from './env.js';
import { ConfigError } from './startup-errors.js';

export { ConfigError, StartupError } from './startup-errors.js';

/**
 * Every setting of every service, read from the environment once. One name per setting in every
 * shape (ARCHITECTURE "Configuration names"); the README's configuration table documents each.
 */
const optionalUrl = z
  .string()
  .trim()
  .url()
  .optional()
  .or(z.literal('').transform(() => undefined));
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));
const bool = z
  .enum(['0', '1', 'true', 'false', ''])
  .optional()
  .transform((v) => v === '1' || v === 'true');
/** A switch that is on unless set to 0 or false. */
const boolTrue = z
  .enum(['0', '1', 'true', 'false', ''])
  .optional()
  .transform((v) => v !== '0' && v !== 'false');
/** Unset and empty are the same: the default applies. */
const blank = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : typeof v === 'string' ? v.trim() : v);
/** A whole number >= min (a count, a limit per minute, milliseconds). */
const int = (def: number, min = 0) => z.preprocess(blank, z.coerce.number().int().min(min).default(def));
/** A number > 0 (milliseconds, thresholds). */
const positive = (def: number) => z.preprocess(blank, z.coerce.number().finite().positive().default(def));
/** A number >= 0 whose default the using service derives. */
const optionalNumber = z.preprocess(blank, z.coerce.number().finite().min(0).optional());

/** A duration with its unit (`7d`, `12h`, `30m`, `90s`, `500ms`, `0`), in milliseconds. */
const duration = (def: number) =>
  z.preprocess(
    blank,
    z
      .string()
      .optional()
      .transform((v, c) => {
        if (v === undefined) return def;
        const ms = parseDuration(v);
        if (ms === undefined) c.addIssue({ code: 'custom', message: 'must be a duration such as 7d, 12h, 30m, 90s, 500ms or 0' });
        return ms ?? def;
      }),
  );

/** How long a process waits for NATS at start before it gives up (NATS_CONNECT_TIMEOUT_MS). */
export const DEFAULT_NATS_CONNECT_TIMEOUT_MS = 60_000;

const schema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_BASE_URL: optionalUrl,
  DATA_DIR: z.string().default('./data'),
  ADMIN_TOKEN: optionalString,
  ADMIN_EMAIL: optionalString,
  ADMIN_PASSWORD: optionalString,
  DATABASE_URL: optionalUrl.refine((v) => v === undefined || /^postgres(ql)?:\/\//i.test(v), {
    message: 'must start with postgres:// or postgresql://',
  }),
  NATS_URL: optionalString,
  REDIS_URL: optionalString,
  S3_ENDPOINT: optionalUrl,
  S3_ACCESS_KEY: optionalString,
  S3_SECRET_KEY: optionalString,
  S3_BUCKET: z.string().default('imagegen'),
  S3_PUBLIC_URL: optionalUrl,
  PROVA_BASE_URL: optionalUrl,
  PROVB_BASE_URL: optionalUrl,
  PROVA_MODEL_MAP: optionalString,
  PROVB_MODEL_MAP: optionalString,
  CREDENTIALS_KEY: optionalString,
  CURSOR_KEY: optionalString,
  // Content Credentials (C2PA, issue 39): PEM text or a file path each; C2PA_SIGNING=off turns signing off.
  C2PA_SIGNING: z.enum(['on', 'off']).default('on'),
  C2PA_SIGNING_KEY: optionalString,
  C2PA_SIGNING_CHAIN: optionalString,
  C2PA_TRUST_ANCHORS: optionalString,
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl,
  TARGET: z.string().default('all'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  EVENTS_PREFIX: z
    .string()
    .regex(/^[a-zA-Z0-9_-]+$/)
    .default('imagegen'),
  GRPC_HOST: z.string().default('127.0.0.1'),
  GRPC_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  TENANCY_ADDR: optionalString,
  LIBRARY_ADDR: optionalString,
  GENERATION_ADDR: optionalString,
  USAGE_ADDR: optionalString,
  WEBHOOKS_ADDR: optionalString,
  OAUTH_URL: optionalUrl,
  MCP_URL: optionalUrl,
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
  ALLOW_LOOPBACK_FETCH: bool,
  WEBHOOK_CA_FILE: optionalString,
  API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).default(3000),
  SIGNING_SECRET_GRACE_MS: int(86_400_000),
  AUDIT_LOG_RETENTION_DAYS: int(400),
  OBJECT_DELETE_GRACE: duration(7 * 86_400_000),
  EXPORT_RETENTION_DAYS: z.preprocess(blank, z.coerce.number().int().min(1).max(365).default(7)),
  DB_POOL_MAX: z.coerce.number().int().min(1).default(5),
  SESSION_JSON_CACHE_MB: z.coerce.number().int().min(0).default(64),
  GRPC_DEADLINE_MS: int(30_000, 1),
  GRPC_IN_PROCESS: boolTrue,
  OPS_PORT: z.preprocess(blank, z.coerce.number().int().min(0).max(65535).optional()),
  SHUTDOWN_DRAIN_MS: int(0),
  LOG_REQUESTS: bool,
  RATE_LIMIT_DISABLED: bool,
  RATE_LIMIT_DEFAULT_PER_MINUTE: int(60),
  RATE_LIMIT_GENERATIONS_PER_MINUTE: int(30),
  RATE_LIMIT_UPLOADS_PER_MINUTE: int(20),
  RATE_LIMIT_OAUTH_TOKEN_PER_MINUTE: int(30),
  RATE_LIMIT_ADMIN_PER_MINUTE: int(300),
  RATE_LIMIT_ADMIN_LOGIN_PER_MINUTE: int(10),
  RATE_LIMIT_PREFIX: optionalString,
  WEBHOOK_TIMEOUT_MS: int(10_000),
  WEBHOOK_POLL_MS: optionalNumber,
  WEBHOOK_RETRY_BASE_MS: optionalNumber,
  WEBHOOK_RETRY_MAX_MS: optionalNumber,
  WEBHOOK_MAX_ATTEMPTS: optionalNumber,
  PROVIDER_BREAKER_THRESHOLD: positive(5),
  PROVIDER_BREAKER_RESET_MS: positive(30_000),
  PROVA_TIMEOUT_MS: positive(120_000),
  PROVB_TIMEOUT_MS: positive(240_000),
  UPLOAD_FETCH_TIMEOUT_MS: positive(30_000),
  JOBS_RUNNING_PER_TENANT: positive(4),
  JOBS_QUEUED_PER_TENANT: positive(1000),
  JOB_WORKERS: positive(8),
  JOB_POLL_MS: positive(500),
  USAGE_TENANT_CACHE_MS: int(5000),
  USAGE_CONSUMER_CONCURRENCY: int(64, 1),
  USAGE_CONSUMER_PARALLEL_BATCHES: int(2, 1),
  USAGE_BATCH_LINGER_MS: int(10),
  OUTBOX_MAX_ATTEMPTS: int(10, 1),
  TENANT_MAX_STREAMS: int(10),
  TENANT_MAX_GENERATIONS_IN_FLIGHT: int(10),
  NATS_CONNECT_TIMEOUT_MS: int(DEFAULT_NATS_CONNECT_TIMEOUT_MS),
});

export type Env = z.infer<typeof schema>;

export interface Config {
  port: number;
  host: string;
  publicBaseUrl: string;
  dataDir: string;
  adminToken?: string;
  adminEmail?: string;
  adminPassword?: string;
  databaseUrl?: string;
  natsUrl?: string;
  redisUrl?: string;
  s3?: { endPoint: string; accessKey: string; secretKey: string; bucket: string; publicUrl?: string };
  provABaseUrl?: string;
  provBBaseUrl?: string;
  /** JSON maps of our model ids to upstream model names, e.g. {"provA-pro-image":"gemini-3-pro-image"}. */
  provAModelMap?: Record<string, string>;
  provBModelMap?: Record<string, string>;
  credentialsKey?: string;
  /** HMAC key of image list cursors (any string); default: derived from CREDENTIALS_KEY. */
  cursorKey?: string;
  /**
   * Content Credentials (C2PA) signing of provider output (services/library/src/credentials): each a PEM text or a
   * file path. Signing is on when `enabled` and both the key and the chain are set; the trust anchors validate.
   */
  contentCredentials: { enabled: boolean; signingKey?: string; signingChain?: string; trustAnchors?: string };
  otelEndpoint?: string;
  target: string;
  logLevel: Env['LOG_LEVEL'];
  eventsPrefix: string;
  grpcHost: string;
  grpcPort: number;
  httpPort: number;
  /** gRPC addresses (host:port) and HTTP URLs of the other services, for the distributed shape. */
  addresses: Partial<Record<ServiceName, string>>;
  shutdownGraceMs: number;
  allowLoopbackFetch: boolean;
  webhookCaFile?: string;
  apiKeyCacheTtlMs: number;
  /** Tenancy: how long a rotated request-signing secret is still accepted (SIGNING_SECRET_GRACE_MS, 24 h). */
  signingSecretGraceMs: number;
  /** Tenancy: days an audit record is kept (AUDIT_LOG_RETENTION_DAYS, 400); 0 keeps them forever. */
  auditLogRetentionDays: number;
  /**
   * Library: how long a deleted image's or product's files stay in storage, not served (OBJECT_DELETE_GRACE, 7d):
   * a database restored from a backup inside it finds every object it lists. 0 removes them at once.
   */
  objectDeleteGraceMs: number;
  /** Gateway: days a tenant export's ZIP is kept (EXPORT_RETENTION_DAYS, 7; issue 40, item 4). */
  exportRetentionDays: number;
  dbPoolMax: number;
  /** Library: MiB of session detail JSON kept per process (sessions/json-cache.ts); 0 keeps none. */
  sessionJsonCacheMb: number;
  /** Calls to a gRPC server of this same process skip the loopback socket (GRPC_IN_PROCESS, default on). */
  grpcInProcess: boolean;
  /** Default deadline of gRPC client calls (GRPC_DEADLINE_MS). */
  grpcDeadlineMs: number;
  /** Port of a standalone service's ops server (/metrics, /livez, /readyz); unset: HTTP_PORT. */
  opsPort?: number;
  /** A standalone service answers 503 on /readyz this long before it stops taking work. */
  shutdownDrainMs: number;
  /** One log line per HTTP request (gateway, oauth, mcp). */
  logRequests: boolean;
  /** Rate limits of the gateway (SPEC 8) and of MCP tool calls; see services/gateway/src/rate-limit.ts. */
  rateLimits: {
    disabled: boolean;
    /** A tenant's API rate when its rate_limit_per_minute is not set. */
    defaultPerMinute: number;
    generationsPerMinute: number;
    uploadsPerMinute: number;
    oauthTokenPerMinute: number;
    adminPerMinute: number;
    adminLoginPerMinute: number;
    /** Redis key prefix (default: EVENTS_PREFIX). */
    prefix?: string;
  };
  /** Webhook delivery; unset values take the dispatcher's defaults (DEFAULT_POLICY). */
  webhooks: { timeoutMs: number; pollMs?: number; retryBaseMs?: number; retryMaxMs?: number; maxAttempts?: number };
  /** Generation tunables (services/generation/src/settings.ts). */
  generation: {
    breakerFailureThreshold: number;
    breakerResetTimeoutMs: number;
    provATimeoutMs: number;
    provBTimeoutMs: number;
    uploadTimeoutMs: number;
    /** Async jobs (services/generation/src/jobs/): each tenant's queued jobs running at once (JOBS_RUNNING_PER_TENANT, 4). */
    jobsRunningPerTenant: number;
    /** A tenant's queued jobs at most (JOBS_QUEUED_PER_TENANT, 1000): beyond it a submit answers 429. */
    jobsQueuedPerTenant: number;
    /** Queued jobs one generation process runs at once (JOB_WORKERS, 8). */
    jobWorkers: number;
    /** How often a process looks for queued jobs and for cancels of the jobs it runs (JOB_POLL_MS, 500). */
    jobPollMs: number;
  };
  /** usage-metering: tenant quota cache lifetime and the consumer's parallelism. */
  usage: { tenantCacheMs: number; consumerConcurrency: number; consumerParallelBatches: number; batchLingerMs: number };
  /**
   * Outbox relay: failed publishes of one event with an unclassified error before it is dead-lettered
   * (OUTBOX_MAX_ATTEMPTS; bus outages never count). startOutboxRelay reads the same variable by default.
   */
  outboxMaxAttempts: number;
  /**
   * Per-tenant caps of the gateway (services/gateway/src/tenant-concurrency.ts): open event streams and
   * generations in flight at once, across gateway replicas when REDIS_URL is set; 0 = no cap.
   */
  tenantLimits: { maxStreams: number; maxGenerationsInFlight: number };
  /**
   * NATS_CONNECT_TIMEOUT_MS: how long start-up waits for NATS (logging every few seconds) before it gives up;
   * createNatsTransport reads the same variable by default.
   */
  natsConnectTimeoutMs: number;
}

export type ServiceName = 'tenancy' | 'library' | 'generation' | 'usage' | 'webhooks' | 'oauth' | 'mcp';

/** Names whose values are never echoed in a message. */
const SECRET_NAME = /KEY|SECRET|TOKEN|PASSWORD/;

/** A URL for messages and logs: its password (and a user name's secret part) replaced by ***. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^/@:\s]*):[^/@\s]*@/g, '$1:***@');
}

const LEVELS = 'fatal, error, warn, info, debug, trace, silent';

/** What a setting must be, for the one-line message about a wrong value. */
function expected(name: string, issue: z.ZodIssue): string | undefined {
  if (name === 'LOG_LEVEL') return `one of ${LEVELS}`;
  if (name === 'DATABASE_URL') return 'a PostgreSQL URL like postgres://user:password@host:5432/database';
  if (name === 'PORT' || name.endsWith('_PORT')) return 'a port number from 0 to 65535';
  if (name.endsWith('_MS')) return 'a whole number of milliseconds';
  if (issue.code === 'invalid_string' && issue.validation === 'url') return 'a URL (scheme://host...)';
  if (issue.code === 'invalid_enum_value') return `one of ${issue.options.join(', ')}`;
  return undefined;
}

function describeIssue(issue: z.ZodIssue, env: NodeJS.ProcessEnv): string {
  const name = issue.path.join('.');
  const raw = env[name];
  const given =
    raw === undefined || SECRET_NAME.test(name)
      ? ''
      : ` (got ${JSON.stringify(redactUrl(raw.length > 80 ? `${raw.slice(0, 80)}...` : raw))})`;
  const want = expected(name, issue);
  return want ? `${name} must be ${want}${given}` : `${name}: ${issue.message}${given}`;
}

function parseJsonMap(name: string, v?: string): Record<string, string> | undefined {
  if (!v) return undefined;
  try {
    const parsed = JSON.parse(v);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed;
  } catch {}
  throw new ConfigError(`${name} must be a JSON object of model id -> upstream model name`);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const r = schema.safeParse(env);
  if (!r.success) {
    // One line (start-up prints it as is), every problem named: 'invalid configuration: PORT must be ...; LOG_LEVEL ...'.
    const problems = [...new Set(r.error.issues.map((i) => describeIssue(i, env)))];
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const e = r.data;
  if (e.S3_ENDPOINT && (!e.S3_ACCESS_KEY || !e.S3_SECRET_KEY)) {
    throw new ConfigError('S3_ENDPOINT needs S3_ACCESS_KEY and S3_SECRET_KEY');
  }
  if (e.CREDENTIALS_KEY && Buffer.from(e.CREDENTIALS_KEY, 'base64').length !== 32) {
    throw new ConfigError('CREDENTIALS_KEY must be 32 bytes, base64-encoded');
  }
  return {
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    dataDir: e.DATA_DIR,
    adminToken: e.ADMIN_TOKEN,
    adminEmail: e.ADMIN_EMAIL,
    adminPassword: e.ADMIN_PASSWORD,
    databaseUrl: e.DATABASE_URL,
    natsUrl: e.NATS_URL,
    redisUrl: e.REDIS_URL,
    s3: e.S3_ENDPOINT
      ? {
          endPoint: e.S3_ENDPOINT,
          accessKey: e.S3_ACCESS_KEY as string,
          secretKey: e.S3_SECRET_KEY as string,
          bucket: e.S3_BUCKET,
          publicUrl: e.S3_PUBLIC_URL,
        }
      : undefined,
    provABaseUrl: e.PROVA_BASE_URL,
    provBBaseUrl: e.PROVB_BASE_URL,
    provAModelMap: parseJsonMap('PROVA_MODEL_MAP', e.PROVA_MODEL_MAP),
    provBModelMap: parseJsonMap('PROVB_MODEL_MAP', e.PROVB_MODEL_MAP),
    credentialsKey: e.CREDENTIALS_KEY,
    cursorKey: e.CURSOR_KEY,
    contentCredentials: {
      enabled: e.C2PA_SIGNING === 'on',
      signingKey: e.C2PA_SIGNING_KEY,
      signingChain: e.C2PA_SIGNING_CHAIN,
      trustAnchors: e.C2PA_TRUST_ANCHORS,
    },
    otelEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT,
    target: e.TARGET,
    logLevel: e.LOG_LEVEL,
    eventsPrefix: e.EVENTS_PREFIX,
    grpcHost: e.GRPC_HOST,
    grpcPort: e.GRPC_PORT,
    httpPort: e.HTTP_PORT,
    addresses: {
      tenancy: e.TENANCY_ADDR,
      library: e.LIBRARY_ADDR,
      generation: e.GENERATION_ADDR,
      usage: e.USAGE_ADDR,
      webhooks: e.WEBHOOKS_ADDR,
      oauth: e.OAUTH_URL,
      mcp: e.MCP_URL,
    },
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    allowLoopbackFetch: e.ALLOW_LOOPBACK_FETCH,
    webhookCaFile: e.WEBHOOK_CA_FILE,
    apiKeyCacheTtlMs: e.API_KEY_CACHE_TTL_MS,
    signingSecretGraceMs: e.SIGNING_SECRET_GRACE_MS,
    auditLogRetentionDays: e.AUDIT_LOG_RETENTION_DAYS,
    objectDeleteGraceMs: e.OBJECT_DELETE_GRACE,
    exportRetentionDays: e.EXPORT_RETENTION_DAYS,
    dbPoolMax: e.DB_POOL_MAX,
    sessionJsonCacheMb: e.SESSION_JSON_CACHE_MB,
    grpcDeadlineMs: e.GRPC_DEADLINE_MS,
    grpcInProcess: e.GRPC_IN_PROCESS,
    opsPort: e.OPS_PORT,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS,
    logRequests: e.LOG_REQUESTS,
    rateLimits: {
      disabled: e.RATE_LIMIT_DISABLED,
      defaultPerMinute: e.RATE_LIMIT_DEFAULT_PER_MINUTE,
      generationsPerMinute: e.RATE_LIMIT_GENERATIONS_PER_MINUTE,
      uploadsPerMinute: e.RATE_LIMIT_UPLOADS_PER_MINUTE,
      oauthTokenPerMinute: e.RATE_LIMIT_OAUTH_TOKEN_PER_MINUTE,
      adminPerMinute: e.RATE_LIMIT_ADMIN_PER_MINUTE,
      adminLoginPerMinute: e.RATE_LIMIT_ADMIN_LOGIN_PER_MINUTE,
      prefix: e.RATE_LIMIT_PREFIX,
    },
    webhooks: {
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      pollMs: e.WEBHOOK_POLL_MS,
      retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
      retryMaxMs: e.WEBHOOK_RETRY_MAX_MS,
      maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
    },
    generation: {
      breakerFailureThreshold: e.PROVIDER_BREAKER_THRESHOLD,
      breakerResetTimeoutMs: e.PROVIDER_BREAKER_RESET_MS,
      provATimeoutMs: e.PROVA_TIMEOUT_MS,
      provBTimeoutMs: e.PROVB_TIMEOUT_MS,
      uploadTimeoutMs: e.UPLOAD_FETCH_TIMEOUT_MS,
      jobsRunningPerTenant: e.JOBS_RUNNING_PER_TENANT,
      jobsQueuedPerTenant: e.JOBS_QUEUED_PER_TENANT,
      jobWorkers: e.JOB_WORKERS,
      jobPollMs: e.JOB_POLL_MS,
    },
    usage: {
      tenantCacheMs: e.USAGE_TENANT_CACHE_MS,
      consumerConcurrency: e.USAGE_CONSUMER_CONCURRENCY,
      consumerParallelBatches: e.USAGE_CONSUMER_PARALLEL_BATCHES,
      batchLingerMs: e.USAGE_BATCH_LINGER_MS,
    },
    outboxMaxAttempts: e.OUTBOX_MAX_ATTEMPTS,
    tenantLimits: { maxStreams: e.TENANT_MAX_STREAMS, maxGenerationsInFlight: e.TENANT_MAX_GENERATIONS_IN_FLIGHT },
    natsConnectTimeoutMs: e.NATS_CONNECT_TIMEOUT_MS,
  };
}
