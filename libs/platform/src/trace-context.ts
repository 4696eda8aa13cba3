import { isSpanContextValid, propagation, type Span } from '@opentelemetry/api';

/*
 * W3C Trace Context at the edges of a process (issue 41): what a proxy forwards, and the `traceresponse` an
 * answer carries. Set up by telemetry.ts (the HTTP instrumentation's request hook remembers each incoming
 * request's server span; `outgoingContextInjected` says whether the client instrumentations write the trace
 * headers of outgoing calls). Imported by the preload through telemetry.ts: nothing instrumented here.
 */

const serverSpans = new WeakMap<object, Span>();
let injected = false;

/** telemetry.ts: the HTTP server span of an incoming request (node's IncomingMessage). */
export function rememberServerSpan(request: object, span: Span): void {
  serverSpans.set(request, span);
}

/** telemetry.ts: true while the SDK runs with its client instrumentations (http, undici, grpc). */
export function outgoingContextInjected(on: boolean): void {
  injected = on;
}

/**
 * The request headers a proxy forwards, less the ones the trace propagators write themselves on the outgoing
 * call (`traceparent`, `tracestate`, `baggage` with the default propagators): the call then carries one
 * `traceparent`, the proxy span's own (a child of the client's), and the client's `tracestate` and baggage as
 * the propagators extracted them; copied as well, Node would join the two copies into one unparsable value.
 * Without tracing nothing is injected, so they pass through unchanged.
 */
export function withoutPropagatedHeaders<H extends Record<string, unknown>>(headers: H): H {
  const fields = injected ? propagation.fields() : [];
  if (!fields.length) return headers;
  const out: Record<string, unknown> = { ...headers };
  for (const f of fields) delete out[f.toLowerCase()];
  return out as H;
}

/**
 * W3C Trace Context Level 2 `traceresponse` for an incoming request (node's IncomingMessage, fastify's
 * `request.raw`): `00-<trace-id>-<this process's HTTP server span id>-<trace-flags>`, so a client finds the
 * trace of its request whether or not it sent a `traceparent`. Given the request's id (X-Request-Id), records
 * it on that span as `imagegen.request_id`, so the trace is also found by the id. Undefined when the request
 * is not traced (tracing off, or a probe or scrape path: UNTRACED_PATHS).
 */
export function traceResponse(request: object, requestId?: string): string | undefined {
  const span = serverSpans.get(request);
  const sc = span?.spanContext();
  if (!span || !sc || !isSpanContextValid(sc)) return undefined;
  if (requestId) span.setAttribute('imagegen.request_id', requestId);
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}
