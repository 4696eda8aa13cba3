import { type Context, context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { recordEventConsumed, recordEventPublished } from '../metrics.js';
import type { EventMessage, EventTransport, OutgoingEvent } from './types.js';

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

// ---- spans and metrics around the bus (added by ops, issue 9) ----

/**
 * Outbox relay side: publishes in a PRODUCER span `publish <subject>` whose parent is the context
 * stored with the event (the request that wrote it), and sends that span's context on, so one
 * request makes one trace through the relay and the bus. Counts imagegen_events_published_total.
 */
export async function publishTraced(transport: EventTransport, msg: OutgoingEvent): Promise<void> {
  const parent = propagation.extract(ROOT_CONTEXT, msg.headers);
  const span = trace.getTracer('imagegen').startSpan(
    `publish ${msg.subject}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': transport.kind === 'nats' ? 'nats' : 'inprocess',
        'messaging.operation.type': 'send',
        'messaging.destination.name': msg.subject,
        'messaging.message.id': msg.id,
      },
    },
    parent,
  );
  const headers = { ...msg.headers };
  propagation.inject(trace.setSpan(parent, span), headers);
  try {
    await context.with(trace.setSpan(parent, span), () => transport.publish({ ...msg, headers }));
    recordEventPublished(msg.subject, true);
  } catch (err) {
    recordEventPublished(msg.subject, false);
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Transport side, around every handler call: a CONSUMER span `process <subject>` child of the
 * producer's context from the message headers (active while the handler runs, so its gRPC calls and
 * queries join the trace), and imagegen_events_consumed/redelivered_total.
 */
export async function handleTraced(
  durable: string,
  msg: EventMessage,
  handler: (m: EventMessage) => Promise<void>,
  system: 'nats' | 'inprocess' = 'nats',
): Promise<void> {
  const parent = propagation.extract(ROOT_CONTEXT, msg.headers);
  const started = performance.now();
  const span = trace.getTracer('imagegen').startSpan(
    `process ${msg.subject}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': system,
        'messaging.operation.type': 'process',
        'messaging.destination.name': msg.subject,
        'messaging.consumer.group.name': durable,
        'messaging.message.id': msg.id,
        'messaging.message.delivery_count': msg.deliveryCount ?? 1,
      },
    },
    parent,
  );
  let outcome: 'ok' | 'error' = 'ok';
  try {
    await context.with(trace.setSpan(parent, span), () => handler(msg));
  } catch (err) {
    outcome = 'error';
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
    throw err;
  } finally {
    span.end();
    recordEventConsumed(durable, msg.subject, outcome, (performance.now() - started) / 1000, msg.deliveryCount ?? 1);
  }
}
