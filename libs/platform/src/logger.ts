import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import pino, { type Logger } from 'pino';
import { ConfigError } from './config.js';

export type { Logger };

/**
 * Keys whose values never reach a log line, wherever they appear at the top level of a line's object or
 * one level down (pino's `*.key` does not match the top level, so both are listed): credentials of
 * callers (API keys, bearer/admin tokens, passwords, session cookies), of providers and of webhooks.
 */
const SECRET_KEYS = [
  'password',
  'newPassword',
  'currentPassword',
  'apiKey',
  'api_key',
  'apiKeys',
  'providerKey',
  'providerKeys',
  'secret',
  'webhookSecret',
  'signingSecret',
  'clientSecret',
  'client_secret',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'adminToken',
  'authorization',
  'cookie',
  'credentials',
  'privateKey',
];
/** Header names carrying credentials (request and response headers, HTTP and gRPC metadata). */
const SECRET_HEADERS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'x-admin-token',
  'x-goog-api-key',
  'x-webhook-secret',
];

/** pino redact paths (exported for tests and for services that build their own pino). */
export const REDACT_PATHS: string[] = [
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`]),
  ...SECRET_HEADERS.flatMap((h) => ['req.headers', 'res.headers', 'headers', 'request.headers', 'err.headers'].map((p) => `${p}["${h}"]`)),
];

/**
 * The child logger for a fastify app's request log (LOG_REQUESTS): a request is logged as method, path
 * without the query string (OAuth codes, state and filters stay out of the logs), route and client
 * address; headers are never logged.
 */
export function httpLogger(parent: Logger, component: string): Logger {
  return parent.child(
    { component },
    {
      serializers: {
        req: (r: { method?: string; url?: string; ip?: string; routeOptions?: { url?: string } }) => ({
          method: r.method,
          url: typeof r.url === 'string' ? r.url.split('?')[0] : r.url,
          route: r.routeOptions?.url,
          remoteAddress: r.ip,
        }),
      },
    },
  );
}

/**
 * pino logger whose lines carry trace_id, span_id and trace_flags of the active span (when tracing is
 * on), with secrets redacted (REDACT_PATHS). `destination` defaults to stdout.
 */
export function createLogger(
  service: string,
  level: string = process.env.LOG_LEVEL ?? 'info',
  destination?: pino.DestinationStream,
): Logger {
  // pino's own refusal is a stack trace ('default level:loud must be included in custom levels').
  if (!(level in pino.levels.values) && level !== 'silent') {
    throw new ConfigError(`LOG_LEVEL must be one of ${Object.keys(pino.levels.values).join(', ')}, silent (got ${JSON.stringify(level)})`);
  }
  const options: pino.LoggerOptions = {
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    mixin() {
      const sc = trace.getSpan(context.active())?.spanContext();
      if (!sc || !isSpanContextValid(sc)) return {};
      return { trace_id: sc.traceId, span_id: sc.spanId, trace_flags: `0${sc.traceFlags.toString(16)}`.slice(-2) };
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * A child of `parent` that is created on the first line actually logged at an enabled level. Per-request
 * children (fastify makes one for every request) cost a pino child() with redaction each, while most requests
 * log nothing at the configured level. Lines, bindings and levels are exactly those of `parent.child(bindings)`.
 * (A class, so a request costs one small object and no closures.)
 */
class LazyChildLogger {
  private real?: Logger;

  constructor(
    private readonly parent: Logger,
    private readonly childBindings: pino.Bindings,
    private readonly opts: pino.ChildLoggerOptions,
  ) {}

  private get logger(): Logger {
    this.real ??= this.parent.child(this.childBindings, this.opts);
    return this.real;
  }

  private write(level: pino.Level, args: unknown[]): void {
    if (!(this.real ?? this.parent).isLevelEnabled(level)) return;
    (this.logger[level] as (...a: unknown[]) => void)(...args);
  }

  fatal(...args: unknown[]) {
    this.write('fatal', args);
  }
  error(...args: unknown[]) {
    this.write('error', args);
  }
  warn(...args: unknown[]) {
    this.write('warn', args);
  }
  info(...args: unknown[]) {
    this.write('info', args);
  }
  debug(...args: unknown[]) {
    this.write('debug', args);
  }
  trace(...args: unknown[]) {
    this.write('trace', args);
  }
  silent() {}
  child(bindings: pino.Bindings, opts?: pino.ChildLoggerOptions): Logger {
    return this.logger.child(bindings, opts);
  }
  bindings(): pino.Bindings {
    return this.logger.bindings();
  }
  isLevelEnabled(level: string): boolean {
    return (this.real ?? this.parent).isLevelEnabled(level);
  }
  get level(): string {
    return (this.real ?? this.parent).level;
  }
  set level(level: string) {
    this.logger.level = level;
  }
}

export function lazyChildLogger(parent: Logger, bindings: pino.Bindings, opts: pino.ChildLoggerOptions = {}): Logger {
  return new LazyChildLogger(parent, bindings, opts) as unknown as Logger;
}
