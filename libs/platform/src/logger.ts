import { context, trace } from '@opentelemetry/api';
import pino, { type Logger } from 'pino';

export type { Logger };

/** pino logger whose lines carry trace_id and span_id of the active span (when tracing is on). */
export function createLogger(service: string, level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers["x-admin-token"]', '*.password', '*.apiKey'],
      censor: '[redacted]',
    },
    mixin() {
      const span = trace.getSpan(context.active());
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
  });
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
