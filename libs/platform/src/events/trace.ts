import { type Context, context, propagation } from '@opentelemetry/api';

/** Writes the active trace context (traceparent, baggage) into `headers`; no-op without an SDK. */
export function injectContext(headers: Record<string, string>, ctx: Context = context.active()): Record<string, string> {
  propagation.inject(ctx, headers);
  return headers;
}

/**
 * The producer's trace context from event headers, so a consumer can start a child span:
 * `tracer.startActiveSpan('handle', {}, extractContext(m.headers), ...)`.
 */
export function extractContext(headers: Record<string, string>, base: Context = context.active()): Context {
  return propagation.extract(base, headers);
}
